"""The batch runner's composite operations (SPEC §4.3), each one write transaction.

Submit (idempotency, caps, insert, sweep), claim, requeue, finish (with the terminal status and
the byte budget), cancel and restart run as single transactions, so two processes can neither
exceed a cap, double a count, nor set a terminal status twice. Metric counters are bumped in
the same transaction as the event they count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sift.constants import BYTES_BUCKETS, SECONDS_BUCKETS
from sift.status import JobStatus, TargetStatus
from sift.store import counters
from sift.store.batch_history import q_oldest_live_job
from sift.store.batch_rows import (
    _IN_LIVE,
    _LIVE,
    Claim,
    Finished,
    Job,
    NewTarget,
    SubmitOutcome,
    _nbytes,
    q_count_live,
    q_create_job,
    q_evict_oldest,
    q_find_idempotent,
    q_get_job,
    q_mark_in_flight_failed,
    q_set_status,
    q_sweep,
    q_update_target,
)
from sift.store.db import Database


class RunnerOps:
    """Mixed into `BatchStore`: the operations the submit path and the worker's drain use."""

    db: Database

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
        fresh: bool = False,
        retry_of: str | None = None,
    ) -> SubmitOutcome:
        """Idempotency, caps, insert and sweep in SPEC order, as one write transaction;
        `fresh` skips the idempotent reuse (the new job becomes the one a later submit reuses).
        """

        def write(c):
            existing = None if fresh else q_find_idempotent(c, caller, idem_key, now, ttl)
            if existing is not None:
                counters.bump(c, counters.JOBS_TOTAL, "reused")
                return SubmitOutcome("reused", existing)
            if len(targets) > targets_per_job:
                return SubmitOutcome("too_many")
            if q_count_live(c, caller) >= jobs_per_caller:
                return SubmitOutcome("caller_busy", live_job=q_oldest_live_job(c, caller))
            if q_count_live(c) >= jobs_total:
                return SubmitOutcome("jobs_busy")
            job = q_create_job(
                c, job_id, caller, caller_class, idem_key, targets, now, retry_of=retry_of
            )
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
        return self.db.write(lambda c: _claim(c, job_id, now))

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
        then_claim: Sequence[str] = (),
    ) -> Finished:
        """Store a fetched target, count it, and set the job's terminal status exactly once.

        With `max_bytes`, a stored result also enforces the byte budget in the same
        transaction, so no committed state is ever over it. With `then_claim`, the same
        transaction then claims the first of those jobs that has a ready target (`next`):
        the drain's usual next step, without a transaction of its own.
        """

        def write(c):
            finished = store(c)
            if finished.stored and result is not None and max_bytes is not None:
                finished = replace(finished, evicted=q_evict_oldest(c, max_bytes))
            for next_job in then_claim:
                claimed = _claim(c, next_job, now)
                if claimed is not None:
                    return replace(finished, next=claimed)
            return finished

        def store(c):
            job = q_update_target(
                c,
                job_id,
                idx,
                status,
                now,
                result=result,
                error=error,
                hint=hint,
                only_from=TargetStatus.RUNNING,
            )
            if job is None:
                return Finished(False)
            rows = [(counters.TARGETS_TOTAL, outcome, 1.0)]
            rows += counters.observation("sift_batch_target_seconds", seconds, SECONDS_BUCKETS)
            if result is not None:
                rows += counters.observation(
                    "sift_batch_result_bytes", _nbytes(result), BYTES_BUCKETS
                )
            if job.status not in _LIVE or job.targets_done < job.targets_total:
                counters.bump_many(c, rows)
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
            rows.append((counters.JOBS_TOTAL, str(terminal), 1.0))
            rows += counters.observation(
                "sift_batch_job_seconds", now - job.created_at, SECONDS_BUCKETS
            )
            counters.bump_many(c, rows)
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
            n = q_mark_in_flight_failed(c, "restart", now)
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


def _claim(c, job_id: str, now: float) -> Claim | None:
    job = q_get_job(c, job_id)
    if job is None or job.status not in _LIVE:
        return None
    busy = c.execute(
        "select 1 from batch_target where job_id = ? and status = ?",
        (job_id, str(TargetStatus.RUNNING)),
    ).fetchone()
    if busy:
        return None
    # The lowest pending target only: a job stays serial even while that target waits to
    # retry after "busy" (target i+1 never starts before i is stored).
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
