"""The batch tables' rows and named queries (SPEC §4.2).

Each `q_*` function runs on a cursor inside a transaction the caller opened, so the accessors
and the runner's composite operations can combine them into one write transaction. Only the
store speaks SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import apsw

from sift.status import FINISHED, LIVE, REUSABLE, JobStatus, TargetStatus

_JOB_COLS = (
    "id, caller, caller_class, idem_key, status, error, targets_total, targets_done, "
    "created_at, lease, nbytes, started_at"
)
_TARGET_COLS = "job_id, idx, url, options, status, result, error, hint, retry_at, busy_since"
_LIVE = tuple(str(s) for s in LIVE)
_IN_LIVE = f"({', '.join('?' * len(_LIVE))})"


class Job(NamedTuple):
    """A `batch_job` row. Rows are tuples: a status read builds dozens of them per request."""

    id: str
    caller: str
    caller_class: str
    idem_key: str
    status: str
    error: str
    targets_total: int
    targets_done: int
    created_at: float
    lease: float
    nbytes: int
    started_at: float | None = None


class TargetRow(NamedTuple):
    job_id: str
    idx: int
    url: str
    options: str
    status: str
    result: str | None
    error: str | None
    hint: str | None
    retry_at: float | None = None
    busy_since: float | None = None


@dataclass(frozen=True, slots=True)
class NewTarget:
    url: str
    options: str  # JSON of the target's options


@dataclass(frozen=True, slots=True)
class Claim:
    """A target the worker has taken: it is `running` until finished or requeued."""

    job_id: str
    idx: int
    url: str
    options: str
    caller: str
    caller_class: str
    busy_since: float | None


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    kind: str  # created | reused | too_many | caller_busy | jobs_busy
    job: Job | None = None
    live_job: str | None = None  # caller_busy: the caller's oldest live job


@dataclass(frozen=True, slots=True)
class Finished:
    stored: bool  # False when the target was not running (or the job is gone)
    terminal: str | None = None  # the job's terminal status, set by this call
    evicted: int = 0  # finished jobs removed by the byte budget in the same transaction
    next: Claim | None = None  # the target taken in the same transaction (`then_claim`)


def _job(row) -> Job:
    return Job(*row)


def _nbytes(text: str | None) -> int:
    return len(text.encode()) if text else 0


# -- named queries on a cursor (composable inside one transaction) ---------------------------


def q_get_job(cur: apsw.Cursor, job_id: str) -> Job | None:
    row = cur.execute(f"select {_JOB_COLS} from batch_job where id = ?", (job_id,)).fetchone()
    return _job(row) if row else None


def q_targets(cur: apsw.Cursor, job_id: str, *, results: bool = True) -> list[TargetRow]:
    cols = _TARGET_COLS if results else _TARGET_COLS.replace("result,", "null,")
    return [
        TargetRow(*r)
        for r in cur.execute(
            f"select {cols} from batch_target where job_id = ? order by idx", (job_id,)
        )
    ]


def q_find_idempotent(cur, caller: str, idem_key: str, now: float, ttl: float) -> Job | None:
    row = cur.execute(
        f"select {_JOB_COLS} from batch_job where caller = ? and idem_key = ? and lease + ? > ? "
        f"and status in ({', '.join('?' * len(REUSABLE))}) "
        "order by created_at desc, rowid desc limit 1",
        (caller, idem_key, ttl, now, *map(str, REUSABLE)),
    ).fetchone()
    return _job(row) if row else None


def q_count_live(cur: apsw.Cursor, caller: str | None = None) -> int:
    if caller is None:
        sql, args = f"select count(*) from batch_job where status in {_IN_LIVE}", _LIVE
    else:
        sql = f"select count(*) from batch_job where caller = ? and status in {_IN_LIVE}"
        args = (caller, *_LIVE)
    return cur.execute(sql, args).fetchone()[0]


def q_create_job(
    cur,
    job_id: str,
    caller: str,
    caller_class: str,
    idem_key: str,
    targets: Sequence[NewTarget],
    now: float,
    *,
    retry_of: str | None = None,
) -> Job:
    cur.execute(
        "insert into batch_job(id, caller, caller_class, idem_key, status, error, targets_total, "
        "targets_done, created_at, lease, nbytes, retry_of) "
        "values (?, ?, ?, ?, ?, '', ?, 0, ?, ?, 0, ?)",
        (
            job_id,
            caller,
            caller_class,
            idem_key,
            str(JobStatus.QUEUED),
            len(targets),
            now,
            now,
            retry_of,
        ),
    )
    cur.executemany(
        "insert into batch_target(job_id, idx, url, options, status) values (?, ?, ?, ?, ?)",
        [(job_id, i, t.url, t.options, str(TargetStatus.PENDING)) for i, t in enumerate(targets)],
    )
    return q_get_job(cur, job_id)


class JobProgress(NamedTuple):
    """The job's counts right after a target update (from the same statement)."""

    status: str
    targets_done: int
    targets_total: int
    created_at: float


def q_update_target(
    cur,
    job_id: str,
    idx: int,
    status: str,
    now: float,
    *,
    result: str | None = None,
    error: str | None = None,
    hint: str | None = None,
    only_from: str | None = None,
) -> JobProgress | None:
    """Rewrite one target and its job's counts; None on a miss (or when the target's status
    is not `only_from`)."""
    old = cur.execute(
        "select status, result from batch_target where job_id = ? and idx = ?", (job_id, idx)
    ).fetchone()
    if old is None or (only_from is not None and old[0] != only_from):
        return None
    finishing = status in FINISHED
    cur.execute(
        "update batch_target set status = ?, result = ?, error = ?, hint = ?, retry_at = null "
        "where job_id = ? and idx = ?",
        (
            status,
            result if finishing else None,
            error if finishing else None,
            hint if finishing else None,
            job_id,
            idx,
        ),
    )
    # targets_done is the number of finished targets, so a target counts once however often
    # it is rewritten (and un-counts if it is ever put back to pending or running).
    counted = int(finishing) - int(old[0] in FINISHED)
    grown = _nbytes(result) - _nbytes(old[1]) if finishing else -_nbytes(old[1])
    row = cur.execute(
        "update batch_job set targets_done = targets_done + ?, nbytes = nbytes + ?, lease = ? "
        "where id = ? returning status, targets_done, targets_total, created_at",
        (counted, grown, now, job_id),
    ).fetchone()
    return JobProgress(*row)


def q_set_status(cur, job_id: str, status: str, now: float, error: str | None = None) -> bool:
    if error is None:
        cur.execute(
            "update batch_job set status = ?, lease = ? where id = ?", (status, now, job_id)
        )
    else:
        cur.execute(
            "update batch_job set status = ?, error = ?, lease = ? where id = ?",
            (status, error, now, job_id),
        )
    return cur.getconnection().changes() > 0


def q_evict_oldest(cur: apsw.Cursor, max_bytes: int) -> int:
    """Remove whole finished jobs, oldest lease first, until batch bytes fit the budget."""
    total = cur.execute("select coalesce(sum(nbytes), 0) from batch_job").fetchone()[0]
    if total <= max_bytes:
        return 0
    victims = []
    for job_id, nbytes in cur.execute(
        f"select id, nbytes from batch_job where status not in {_IN_LIVE} order by lease, rowid",
        _LIVE,
    ):
        if total <= max_bytes:
            break
        victims.append(job_id)
        total -= nbytes
    cur.executemany("delete from batch_job where id = ?", [(v,) for v in victims])
    return len(victims)


def q_sweep(cur: apsw.Cursor, now: float, ttl: float) -> int:
    cur.execute("delete from batch_job where lease + ? <= ?", (ttl, now))
    return cur.getconnection().changes()


def q_mark_in_flight_failed(c: apsw.Cursor, reason: str, now: float) -> int:
    # Nothing is in flight when a worker starts: a target left `running` (a cancelled job's
    # included) belonged to the dead worker and would count as in flight forever.
    c.execute(
        "update batch_target set status = ?, retry_at = null where status = ?",
        (str(TargetStatus.PENDING), str(TargetStatus.RUNNING)),
    )
    c.execute(
        f"update batch_job set status = ?, error = ?, lease = ? where status in {_IN_LIVE}",
        (str(JobStatus.FAILED), reason, now, *_LIVE),
    )
    return c.getconnection().changes()
