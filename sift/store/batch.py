"""The batch tables: named queries for jobs and targets (SPEC §4.2).

The store is pure: every accessor that involves time takes `now`; accessors are keyed by job id
only (ownership is the API's job); a miss returns None or a count, never an exception. The
composite operations the runner needs (submit, claim, finish, cancel, restart) each run as one
write transaction so that concurrent processes can neither exceed a cap nor double a count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import apsw

from sift.constants import BYTES_BUCKETS, SECONDS_BUCKETS
from sift.status import FINISHED, LIVE, REUSABLE, JobStatus, TargetStatus
from sift.store import counters
from sift.store.db import Database

_JOB_COLS = (
    "id, caller, caller_class, idem_key, status, error, targets_total, targets_done, "
    "created_at, lease, nbytes, started_at"
)
_TARGET_COLS = "job_id, idx, url, options, status, result, error, hint, retry_at, busy_since"
_LIVE = tuple(str(s) for s in LIVE)
_IN_LIVE = f"({', '.join('?' * len(_LIVE))})"


@dataclass(frozen=True, slots=True)
class Job:
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


@dataclass(frozen=True, slots=True)
class TargetRow:
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


@dataclass(frozen=True, slots=True)
class Finished:
    stored: bool  # False when the target was not running (or the job is gone)
    terminal: str | None = None  # the job's terminal status, set by this call
    evicted: int = 0  # finished jobs removed by the byte budget in the same transaction


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
) -> Job:
    cur.execute(
        "insert into batch_job(id, caller, caller_class, idem_key, status, error, targets_total, "
        "targets_done, created_at, lease, nbytes) values (?, ?, ?, ?, ?, '', ?, 0, ?, ?, 0)",
        (job_id, caller, caller_class, idem_key, str(JobStatus.QUEUED), len(targets), now, now),
    )
    cur.executemany(
        "insert into batch_target(job_id, idx, url, options, status) values (?, ?, ?, ?, ?)",
        [(job_id, i, t.url, t.options, str(TargetStatus.PENDING)) for i, t in enumerate(targets)],
    )
    return q_get_job(cur, job_id)


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
) -> bool:
    old = cur.execute(
        "select status, result from batch_target where job_id = ? and idx = ?", (job_id, idx)
    ).fetchone()
    if old is None:
        return False
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
    cur.execute(
        "update batch_job set targets_done = targets_done + ?, nbytes = nbytes + ?, lease = ? "
        "where id = ?",
        (counted, grown, now, job_id),
    )
    return True


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


class BatchStore:
    """The batch accessors over one `Database`; each call is one transaction."""

    def __init__(self, db: Database):
        self.db = db

    # -- SPEC §4.2 accessors ------------------------------------------------------------------

    def create_job(
        self,
        job_id: str,
        caller: str,
        caller_class: str,
        idem_key: str,
        targets: Sequence[NewTarget],
        now: float,
    ) -> Job:
        return self.db.write(
            lambda c: q_create_job(c, job_id, caller, caller_class, idem_key, targets, now)
        )

    def get_job(self, job_id: str) -> Job | None:
        return self.db.read(lambda c: q_get_job(c, job_id))

    def get_targets(self, job_id: str, *, results: bool = True) -> list[TargetRow]:
        return self.db.read(lambda c: q_targets(c, job_id, results=results))

    def get_status(
        self, job_id: str, *, results: bool = True
    ) -> tuple[Job, list[TargetRow]] | None:
        """The job and its targets from one snapshot."""

        def read(c):
            job = q_get_job(c, job_id)
            return (job, q_targets(c, job_id, results=results)) if job else None

        return self.db.read(read)

    def find_idempotent(self, caller: str, idem_key: str, now: float, ttl: float) -> Job | None:
        return self.db.read(lambda c: q_find_idempotent(c, caller, idem_key, now, ttl))

    def count_live(self, caller: str | None = None) -> int:
        return self.db.read(lambda c: q_count_live(c, caller))

    def update_target(
        self,
        job_id: str,
        idx: int,
        status: str,
        now: float,
        *,
        result: str | None = None,
        error: str | None = None,
        hint: str | None = None,
    ) -> bool:
        return self.db.write(
            lambda c: q_update_target(
                c, job_id, idx, status, now, result=result, error=error, hint=hint
            )
        )

    def set_status(self, job_id: str, status: str, now: float, error: str | None = None) -> bool:
        return self.db.write(lambda c: q_set_status(c, job_id, status, now, error))

    def touch(self, job_id: str, now: float) -> bool:
        def write(c):
            c.execute("update batch_job set lease = ? where id = ?", (now, job_id))
            return c.getconnection().changes() > 0

        return self.db.write(write)

    def sweep(self, now: float, ttl: float) -> int:
        return self.db.write(lambda c: q_sweep(c, now, ttl))

    def evict_oldest(self, max_bytes: int) -> int:
        """Remove whole finished jobs, oldest lease first, until batch bytes fit the budget."""
        if self.batch_nbytes() <= max_bytes:  # a read: no write lock when within budget
            return 0
        return self.db.write(lambda c: q_evict_oldest(c, max_bytes))

    def mark_in_flight_failed(self, reason: str, now: float) -> int:
        return self.db.write(lambda c: self._mark_in_flight_failed(c, reason, now))

    @staticmethod
    def _mark_in_flight_failed(c: apsw.Cursor, reason: str, now: float) -> int:
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

    def batch_nbytes(self) -> int:
        return self.db.read(
            lambda c: c.execute("select coalesce(sum(nbytes), 0) from batch_job").fetchone()[0]
        )

    # -- composite operations of the runner (SPEC §4.3) ---------------------------------------

    def submit(
        self,
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
    ) -> SubmitOutcome:
        """Idempotency, caps, insert and sweep in SPEC order, as one write transaction."""

        def write(c):
            existing = q_find_idempotent(c, caller, idem_key, now, ttl)
            if existing is not None:
                counters.bump(c, counters.JOBS_TOTAL, "reused")
                return SubmitOutcome("reused", existing)
            if len(targets) > targets_per_job:
                return SubmitOutcome("too_many")
            if q_count_live(c, caller) >= jobs_per_caller:
                return SubmitOutcome("caller_busy")
            if q_count_live(c) >= jobs_total:
                return SubmitOutcome("jobs_busy")
            job = q_create_job(c, job_id, caller, caller_class, idem_key, targets, now)
            counters.bump(c, counters.JOBS_TOTAL, "created")
            q_sweep(c, now, ttl)
            return SubmitOutcome("created", job)

        return self.db.write(write)

    def live_jobs(self) -> list[str]:
        """Ids of live jobs in submit order: the worker's rotation."""
        return self.db.read(
            lambda c: [
                r[0]
                for r in c.execute(
                    f"select id from batch_job where status in {_IN_LIVE} "
                    "order by created_at, rowid",
                    _LIVE,
                )
            ]
        )

    def next_retry_at(self) -> float | None:
        """The earliest time a waiting (busy) target of a live job becomes ready."""
        return self.db.read(
            lambda c: c.execute(
                "select min(t.retry_at) from batch_target t join batch_job j on j.id = t.job_id "
                f"where t.status = ? and t.retry_at is not null and j.status in {_IN_LIVE}",
                (str(TargetStatus.PENDING), *_LIVE),
            ).fetchone()[0]
        )

    def claim(self, job_id: str, now: float) -> Claim | None:
        """Take the job's next ready target, if the job is live and has nothing in flight."""

        def write(c):
            job = q_get_job(c, job_id)
            if job is None or job.status not in _LIVE:
                return None
            busy = c.execute(
                "select 1 from batch_target where job_id = ? and status = ?",
                (job_id, str(TargetStatus.RUNNING)),
            ).fetchone()
            if busy:
                return None
            # The lowest pending target only: a job stays serial even while that target
            # waits to retry after "busy" (target i+1 never starts before i is stored).
            row = c.execute(
                "select idx, url, options, busy_since, retry_at from batch_target "
                "where job_id = ? and status = ? order by idx limit 1",
                (job_id, str(TargetStatus.PENDING)),
            ).fetchone()
            if row is None or (row[4] is not None and row[4] > now):
                return None
            idx, url, options, busy_since, _ = row
            c.execute(
                "update batch_target set status = ?, started_at = ? where job_id = ? and idx = ?",
                (str(TargetStatus.RUNNING), now, job_id, idx),
            )
            if job.status == JobStatus.QUEUED:
                c.execute(
                    "update batch_job set status = ?, started_at = ?, lease = ? where id = ?",
                    (str(JobStatus.RUNNING), now, now, job_id),
                )
            else:
                c.execute("update batch_job set lease = ? where id = ?", (now, job_id))
            return Claim(job_id, idx, url, options, job.caller, job.caller_class, busy_since)

        return self.db.write(write)

    def requeue(
        self, job_id: str, idx: int, *, retry_at: float, busy_since: float, now: float
    ) -> bool:
        """A busy target goes back to `pending`, to be retried at `retry_at`."""

        def write(c):
            c.execute(
                "update batch_target set status = ?, retry_at = ?, busy_since = ? "
                "where job_id = ? and idx = ? and status = ?",
                (
                    str(TargetStatus.PENDING),
                    retry_at,
                    busy_since,
                    job_id,
                    idx,
                    str(TargetStatus.RUNNING),
                ),
            )
            changed = c.getconnection().changes() > 0
            if changed:
                c.execute("update batch_job set lease = ? where id = ?", (now, job_id))
            return changed

        return self.db.write(write)

    def finish(
        self,
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
        max_bytes: int | None = None,
    ) -> Finished:
        """Store a fetched target, count it, and set the job's terminal status exactly once.

        With `max_bytes`, a stored result also enforces the byte budget in the same
        transaction, so no committed state is ever over it.
        """

        def write(c):
            finished = store(c)
            if finished.stored and result is not None and max_bytes is not None:
                return replace(finished, evicted=q_evict_oldest(c, max_bytes))
            return finished

        def store(c):
            row = c.execute(
                "select status from batch_target where job_id = ? and idx = ?", (job_id, idx)
            ).fetchone()
            if row is None or row[0] != TargetStatus.RUNNING:
                return Finished(False)
            q_update_target(c, job_id, idx, status, now, result=result, error=error, hint=hint)
            counters.bump(c, counters.TARGETS_TOTAL, outcome)
            counters.observe(c, "sift_batch_target_seconds", seconds, SECONDS_BUCKETS)
            if result is not None:
                counters.observe(c, "sift_batch_result_bytes", _nbytes(result), BYTES_BUCKETS)
            job = q_get_job(c, job_id)
            if job.status not in _LIVE or job.targets_done < job.targets_total:
                return Finished(True)
            failed = c.execute(
                "select count(*) from batch_target where job_id = ? and status = ?",
                (job_id, str(TargetStatus.FAILED)),
            ).fetchone()[0]
            terminal = (
                JobStatus.FAILED
                if failed == job.targets_total
                else JobStatus.DONE
                if failed == 0
                else JobStatus.PARTIAL
            )
            q_set_status(c, job_id, str(terminal), now)
            counters.bump(c, counters.JOBS_TOTAL, str(terminal))
            counters.observe(c, "sift_batch_job_seconds", now - job.created_at, SECONDS_BUCKETS)
            return Finished(True, str(terminal))

        return self.db.write(write)

    def cancel(self, job_id: str, now: float) -> Job | None:
        """Flip a live job to `cancelled`; returns the job as it was before (None if unknown)."""

        def write(c):
            job = q_get_job(c, job_id)
            if job is not None and job.status in _LIVE:
                q_set_status(c, job_id, str(JobStatus.CANCELLED), now)
                counters.bump(c, counters.JOBS_TOTAL, "cancelled")
            return job

        return self.db.write(write)

    def restart(self, now: float) -> int:
        """The worker's start: fail every in-flight job with `restart`, and count them."""

        def write(c):
            n = self._mark_in_flight_failed(c, "restart", now)
            if n:
                counters.bump(c, counters.JOBS_TOTAL, "restart", n)
            return n

        return self.db.write(write)

    def gauges(self) -> tuple[int, int]:
        """(live jobs, targets in flight) for the queue-depth and in-flight gauges."""

        def read(c):
            depth = q_count_live(c)
            inflight = c.execute(
                "select count(*) from batch_target where status = ?", (str(TargetStatus.RUNNING),)
            ).fetchone()[0]
            return depth, inflight

        return self.db.read(read)

    def terminal_among(self, job_ids: Sequence[str]) -> list[str]:
        """Which of these jobs are terminal (or gone): what long-polling readers wait for."""

        def read(c):
            marks = ", ".join("?" * len(job_ids))
            live = {
                r[0]
                for r in c.execute(
                    f"select id from batch_job where id in ({marks}) and status in {_IN_LIVE}",
                    (*job_ids, *_LIVE),
                )
            }
            return [j for j in job_ids if j not in live]

        return self.db.read(read)
