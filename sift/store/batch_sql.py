"""The batch tables' SQL: named queries on a cursor, and the transactions built from them.

Each function runs inside a transaction its caller (`sift.store.batch`) opened, so the
composite operations combine them into one write transaction: two processes can neither
exceed a cap, double a count, nor set a terminal status twice (docs/WORKER.md §The store's
transactions). Metric counters are bumped in the same transaction as the event they count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

import apsw

from sift.constants import BYTES_BUCKETS, SECONDS_BUCKETS
from sift.status import FINISHED, LIVE, REUSABLE, JobStatus, TargetStatus
from sift.store import counters
from sift.store.records import Claim, Finished, Job, NewTarget, SubmitOutcome, TargetRow

_JOB_COLS = (
    "id, caller, caller_class, idem_key, status, error, targets_total, targets_done, "
    "created_at, lease, nbytes, started_at"
)
_TARGET_COLS = (
    "job_id, idx, url, options, status, result, error, hint, retry_at, busy_since, "
    "retryable, retry_after"
)
_LIVE = tuple(str(s) for s in LIVE)
_IN_LIVE = f"({', '.join('?' * len(_LIVE))})"
_RUNNING, _PENDING = str(TargetStatus.RUNNING), str(TargetStatus.PENDING)


def _nbytes(text: str | None) -> int:
    return len(text.encode()) if text else 0


# -- the sliding lease (docs/API.md §Job lifetime) --------------------------------------------
# Every write to a job sets its lease to that write's `now`; an owner's status read slides it
# too, at most once per TOUCH_EVERY seconds; a job whose lease + ttl is not after now is gone.
# Besides the insert (lease = created_at), these are the only statements that write `lease`
# or compare it with the ttl.

TOUCH_EVERY = 1.0


def _slide(
    cur: apsw.Cursor,
    now: float,
    where: str,
    where_args: Sequence,
    sets: str = "",
    set_args: Sequence = (),
    returning: str = "",
) -> apsw.Cursor:
    """`update batch_job set <sets>, lease = now where <where>`: every job write slides."""
    sets = f"{sets}, lease = ?" if sets else "lease = ?"
    tail = f" returning {returning}" if returning else ""
    return cur.execute(
        f"update batch_job set {sets} where {where}{tail}", (*set_args, now, *where_args)
    )


def _slide_job(
    cur: apsw.Cursor, job_id: str, now: float, sets: str = "", set_args=(), returning: str = ""
) -> apsw.Cursor:
    return _slide(cur, now, "id = ?", (job_id,), sets, set_args, returning)


def touch_due(job: Job, now: float) -> bool:
    """Whether an owner's read at `now` slides the lease (not within TOUCH_EVERY of the last)."""
    return now - job.lease >= TOUCH_EVERY


def touch(cur: apsw.Cursor, job_id: str, now: float) -> bool:
    _slide_job(cur, job_id, now)
    return cur.getconnection().changes() > 0


def sweep(cur: apsw.Cursor, now: float, ttl: float) -> int:
    """Delete every job whose lease + ttl is not after `now` (its targets go with it)."""
    cur.execute("delete from batch_job where lease + ? <= ?", (ttl, now))
    return cur.getconnection().changes()


def _find_reusable(cur, caller: str, idem_key: str, now: float, ttl: float) -> Job | None:
    row = cur.execute(
        f"select {_JOB_COLS} from batch_job where caller = ? and idem_key = ? and lease + ? > ? "
        f"and status in ({', '.join('?' * len(REUSABLE))}) "
        "order by created_at desc, rowid desc limit 1",
        (caller, idem_key, ttl, now, *map(str, REUSABLE)),
    ).fetchone()
    return Job(*row) if row else None


# -- reads --------------------------------------------------------------------------------------


def get_job(cur: apsw.Cursor, job_id: str) -> Job | None:
    row = cur.execute(f"select {_JOB_COLS} from batch_job where id = ?", (job_id,)).fetchone()
    return Job(*row) if row else None


def get_targets(cur: apsw.Cursor, job_id: str, *, results: bool = True) -> list[TargetRow]:
    cols = _TARGET_COLS if results else _TARGET_COLS.replace("result,", "null,")
    return [
        TargetRow(*r)
        for r in cur.execute(
            f"select {cols} from batch_target where job_id = ? order by idx", (job_id,)
        )
    ]


def status(cur: apsw.Cursor, job_id: str, results: bool) -> tuple[Job, list[TargetRow]] | None:
    """The job and its targets from one snapshot."""
    job = get_job(cur, job_id)
    return (job, get_targets(cur, job_id, results=results)) if job else None


def count_live(cur: apsw.Cursor, caller: str | None = None, caller_class: str | None = None) -> int:
    """Live jobs in total, or of one caller (its owner string and, when given, its class)."""
    if caller is None:
        sql, args = f"select count(*) from batch_job where status in {_IN_LIVE}", _LIVE
    elif caller_class is None:
        sql = f"select count(*) from batch_job where caller = ? and status in {_IN_LIVE}"
        args = (caller, *_LIVE)
    else:
        sql = (
            "select count(*) from batch_job where caller = ? and caller_class = ? "
            f"and status in {_IN_LIVE}"
        )
        args = (caller, caller_class, *_LIVE)
    return cur.execute(sql, args).fetchone()[0]


def oldest_live_job(cur: apsw.Cursor, caller: str, caller_class: str) -> str | None:
    """The caller's oldest live job: the one a `caller busy` refusal names."""
    row = cur.execute(
        f"select id from batch_job where caller = ? and caller_class = ? and status in {_IN_LIVE} "
        "order by created_at, rowid limit 1",
        (caller, caller_class, *_LIVE),
    ).fetchone()
    return row[0] if row else None


def live_owners(cur: apsw.Cursor) -> list[tuple[str, str, str]]:
    """(id, caller, class) of live jobs in submit order: the worker's rotation and whose each
    job is (docs/WORKER.md §Fair shares between callers)."""
    return [
        (r[0], r[1], r[2])
        for r in cur.execute(
            f"select id, caller, caller_class from batch_job where status in {_IN_LIVE} "
            "order by created_at, rowid",
            _LIVE,
        )
    ]


def live_jobs(cur: apsw.Cursor) -> list[str]:
    """Ids of live jobs in submit order."""
    return [job for job, _, _ in live_owners(cur)]


def terminal_among(cur: apsw.Cursor, job_ids: Sequence[str]) -> list[str]:
    """Which of these jobs are terminal (or gone): what long-polling readers wait for."""
    marks = ", ".join("?" * len(job_ids))
    live = {
        r[0]
        for r in cur.execute(
            f"select id from batch_job where id in ({marks}) and status in {_IN_LIVE}",
            (*job_ids, *_LIVE),
        )
    }
    return [j for j in job_ids if j not in live]


def gauges(cur: apsw.Cursor) -> tuple[int, int]:
    """(live jobs, targets in flight) for the queue-depth and in-flight gauges."""
    inflight = cur.execute(
        "select count(*) from batch_target where status = ?", (_RUNNING,)
    ).fetchone()[0]
    return count_live(cur), inflight


# -- submit, cancel, restart ---------------------------------------------------------------


def _create_job(cur, job_id, caller, caller_class, idem_key, targets, now, retry_of) -> Job:
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
        [(job_id, i, t.url, t.options, _PENDING) for i, t in enumerate(targets)],
    )
    return get_job(cur, job_id)


def submit(
    cur: apsw.Cursor,
    *,
    job_id: str,
    caller: str,
    caller_class: str,
    idem_key: str,
    targets: Sequence[NewTarget],
    now: float,
    ttl: float,
    targets_per_job: int,
    jobs_per_caller: int,
    jobs_total: int,
    fresh: bool = False,
    retry_of: str | None = None,
) -> SubmitOutcome:
    """Idempotency, caps, insert and sweep, in the order docs/API.md §POST /v1/batch gives;
    `fresh` skips the reuse (the new job is then the one a later plain submit reuses)."""
    existing = None if fresh else _find_reusable(cur, caller, idem_key, now, ttl)
    if existing is not None:
        counters.bump(cur, counters.JOBS_TOTAL, "reused")
        return SubmitOutcome("reused", existing)
    if len(targets) > targets_per_job:
        return SubmitOutcome("too_many")
    if count_live(cur, caller, caller_class) >= jobs_per_caller:
        return SubmitOutcome("caller_busy", live_job=oldest_live_job(cur, caller, caller_class))
    if count_live(cur) >= jobs_total:
        return SubmitOutcome("jobs_busy")
    job = _create_job(cur, job_id, caller, caller_class, idem_key, targets, now, retry_of)
    counters.bump(cur, counters.JOBS_TOTAL, "created")
    sweep(cur, now, ttl)
    return SubmitOutcome("created", job)


def cancel(cur: apsw.Cursor, job_id: str, now: float) -> Job | None:
    """Flip a live job to `cancelled`; returns the job as it was before (None if unknown)."""
    job = get_job(cur, job_id)
    if job is not None and job.status in _LIVE:
        _slide_job(cur, job_id, now, "status = ?", (str(JobStatus.CANCELLED),))
        counters.bump(cur, counters.JOBS_TOTAL, "cancelled")
    return job


def restart(cur: apsw.Cursor, now: float) -> int:
    """A worker becomes active: every started (`running`) job fails with `restart`, counted
    once each; it never resumes. A `queued` job has had no target taken, so nothing of it was
    lost: it stays queued and the new worker starts it from the beginning, which is what makes
    a submit while no worker runs safe (docs/WORKER.md §Restart semantics).

    Nothing is in flight when a worker starts: a target left `running` (a cancelled job's
    included) belonged to the dead worker and would count as in flight forever, so it goes
    back to `pending`.
    """
    cur.execute(
        "update batch_target set status = ?, retry_at = null where status = ?",
        (_PENDING, _RUNNING),
    )
    _slide(
        cur,
        now,
        "status = ?",
        (str(JobStatus.RUNNING),),
        "status = ?, error = ?",
        (str(JobStatus.FAILED), "restart"),
    )
    failed = cur.getconnection().changes()
    if failed:
        counters.bump(cur, counters.JOBS_TOTAL, "restart", failed)
    return failed


# -- the drain: claim, requeue, finish -------------------------------------------------------


def claim(cur: apsw.Cursor, job_id: str, now: float) -> Claim | None:
    """Take the job's next ready target, if the job is live and has nothing in flight."""
    job = get_job(cur, job_id)
    if job is None or job.status not in _LIVE:
        return None
    busy = cur.execute(
        "select 1 from batch_target where job_id = ? and status = ?", (job_id, _RUNNING)
    ).fetchone()
    if busy:
        return None
    # The lowest pending target only: a job stays serial even while that target waits to
    # retry after "busy" (target i+1 never starts before i is stored).
    row = cur.execute(
        "select idx, url, options, busy_since, retry_at from batch_target "
        "where job_id = ? and status = ? order by idx limit 1",
        (job_id, _PENDING),
    ).fetchone()
    if row is None or (row[4] is not None and row[4] > now):
        return None
    idx, url, options, busy_since, _ = row
    cur.execute(
        "update batch_target set status = ?, started_at = ? where job_id = ? and idx = ?",
        (_RUNNING, now, job_id, idx),
    )
    if job.status == JobStatus.QUEUED:
        _slide_job(cur, job_id, now, "status = ?, started_at = ?", (str(JobStatus.RUNNING), now))
    else:
        _slide_job(cur, job_id, now)
    return Claim(job_id, idx, url, options, job.caller, job.caller_class, busy_since)


def requeue(
    cur: apsw.Cursor,
    job_id: str,
    idx: int,
    *,
    retry_at: float,
    busy_since: float | None,
    now: float,
    reason: str | None = None,
) -> bool:
    """A busy target goes back to `pending`, to be retried at `retry_at`; `reason` says why
    it waits (docs/API.md §Waiting targets)."""
    cur.execute(
        "update batch_target set status = ?, retry_at = ?, busy_since = ? "
        "where job_id = ? and idx = ? and status = ?",
        (_PENDING, retry_at, busy_since, job_id, idx, _RUNNING),
    )
    changed = cur.getconnection().changes() > 0
    if changed:
        cur.execute("delete from target_wait where job_id = ? and idx = ?", (job_id, idx))
        if reason:
            cur.execute(
                "insert into target_wait(job_id, idx, reason) values (?, ?, ?)",
                (job_id, idx, reason),
            )
        _slide_job(cur, job_id, now)
    return changed


class _Progress(NamedTuple):
    """The job's counts right after a target is stored (from the same statement)."""

    status: str
    targets_done: int
    targets_total: int
    created_at: float


def _store_target(cur, job_id, idx, status, now, result, failure) -> _Progress | None:
    """Rewrite a running target with its outcome and count it into its job; None when the
    target is not running (or is gone)."""
    old = cur.execute(
        "select status from batch_target where job_id = ? and idx = ?", (job_id, idx)
    ).fetchone()
    if old is None or old[0] != _RUNNING:
        return None
    finishing = status in FINISHED
    error, hint, retryable, retry_after = failure if finishing else (None, None, None, None)
    cur.execute(
        "update batch_target set status = ?, result = ?, error = ?, hint = ?, retry_at = null, "
        "retryable = ?, retry_after = ? where job_id = ? and idx = ?",
        (
            status,
            result if finishing else None,
            error,
            hint,
            None if retryable is None else int(retryable),
            retry_after if retryable else None,
            job_id,
            idx,
        ),
    )
    row = _slide_job(
        cur,
        job_id,
        now,
        "targets_done = targets_done + ?, nbytes = nbytes + ?",
        (int(finishing), _nbytes(result) if finishing else 0),
        returning="status, targets_done, targets_total, created_at",
    ).fetchone()
    return _Progress(*row)


def _terminal(cur: apsw.Cursor, job_id: str, total: int) -> str:
    failed = cur.execute(
        "select count(*) from batch_target where job_id = ? and status = ?",
        (job_id, str(TargetStatus.FAILED)),
    ).fetchone()[0]
    if failed == total:
        return str(JobStatus.FAILED)
    return str(JobStatus.DONE if failed == 0 else JobStatus.PARTIAL)


def _evict_oldest(cur: apsw.Cursor, max_bytes: int, for_job: str | None = None) -> int:
    """Remove whole finished jobs until batch bytes fit the budget; never a live job.

    The owner of `for_job` (the job whose result is being stored) pays first: its own finished
    jobs go, oldest lease first. Then only callers holding more than an equal share
    (`max_bytes` ÷ callers with stored bytes) lose their oldest finished jobs, down to the
    share; a caller within its share keeps its jobs, so one caller cannot evict everyone's
    results (docs/WORKER.md §Byte budget).
    """
    total = cur.execute("select coalesce(sum(nbytes), 0) from batch_job").fetchone()[0]
    if total <= max_bytes:
        return 0
    jobs = cur.execute(
        f"select id, caller, caller_class, nbytes from batch_job where status not in {_IN_LIVE} "
        "order by lease, rowid",
        _LIVE,
    ).fetchall()
    held: dict[tuple[str, str], int] = {}
    for owner, klass, nbytes in cur.execute(
        "select caller, caller_class, sum(nbytes) from batch_job group by caller, caller_class"
    ):
        held[(owner, klass)] = nbytes
    payer = None
    if for_job is not None:
        row = cur.execute(
            "select caller, caller_class from batch_job where id = ?", (for_job,)
        ).fetchone()
        payer = tuple(row) if row else None
    share = max_bytes / max(1, sum(1 for n in held.values() if n > 0))
    victims: list[str] = []
    for job_id, owner, klass, nbytes in jobs:  # the payer's own first
        if total <= max_bytes:
            break
        if (owner, klass) == payer and job_id != for_job:
            victims.append(job_id)
            total -= nbytes
            held[payer] -= nbytes
    for job_id, owner, klass, nbytes in jobs:  # then whoever is over an equal share
        if total <= max_bytes:
            break
        if job_id in victims or held[(owner, klass)] <= share:
            continue
        victims.append(job_id)
        total -= nbytes
        held[(owner, klass)] -= nbytes
    cur.executemany("delete from batch_job where id = ?", [(v,) for v in victims])
    return len(victims)


def finish(
    cur: apsw.Cursor,
    job_id: str,
    idx: int,
    *,
    status: str,
    outcome: str,
    seconds: float,
    now: float,
    result: str | None = None,
    error: str | None = None,
    hint: str | None = None,
    retryable: bool = False,
    retry_after: float | None = None,
    max_bytes: int | None = None,
    then_claim: Sequence[str] = (),
) -> Finished:
    """Store a fetched target, count it, set the job's terminal status exactly once, keep
    the byte budget, and claim the next target: one transaction (see `BatchStore.finish`)."""
    failure = (error, hint, retryable, retry_after)
    finished = _finish_target(cur, job_id, idx, status, outcome, seconds, now, result, failure)
    if finished.stored and result is not None and max_bytes is not None:
        finished = replace(finished, evicted=_evict_oldest(cur, max_bytes, job_id))
    for next_job in then_claim:
        claimed = claim(cur, next_job, now)
        if claimed is not None:
            return replace(finished, next=claimed)
    return finished


def _finish_target(cur, job_id, idx, status, outcome, seconds, now, result, failure):
    job = _store_target(cur, job_id, idx, status, now, result, failure)
    if job is None:
        return Finished(False)
    rows = [(counters.TARGETS_TOTAL, outcome, 1.0)]
    rows += counters.observation(counters.TARGET_SECONDS, seconds, SECONDS_BUCKETS)
    if result is not None:
        rows += counters.observation(counters.RESULT_BYTES, _nbytes(result), BYTES_BUCKETS)
    if job.status not in _LIVE or job.targets_done < job.targets_total:
        counters.bump_many(cur, rows)
        return Finished(True)
    terminal = _terminal(cur, job_id, job.targets_total)
    _slide_job(cur, job_id, now, "status = ?", (terminal,))
    rows.append((counters.JOBS_TOTAL, terminal, 1.0))
    rows += counters.observation(counters.JOB_SECONDS, now - job.created_at, SECONDS_BUCKETS)
    counters.bump_many(cur, rows)
    return Finished(True, terminal)
