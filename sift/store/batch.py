"""The batch store: every operation production performs on jobs and targets.

Each operation is one transaction (SQL in `batch_sql`), takes `now` where a rule depends on
time, is keyed by job id only (ownership is the API's rule, `sift.batch.jobs`), and answers a
miss with None or a count, never an exception. Each also picks its own thread: the worker's
per-target calls (claim, finish, requeue) run on the event loop when the database is free that
instant and on the writer thread otherwise (`Database.write_now`); other writes run on the
writer thread and reads on the reader thread, so no caller ever waits on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from sift.store import batch_history as history
from sift.store import batch_sql as sql
from sift.store import rules
from sift.store.db import Database
from sift.store.records import (
    Caps,
    Claim,
    Fetched,
    Finished,
    Job,
    JobSummary,
    ListPosition,
    NewJob,
    NewTarget,
    ResultPage,
    SubmitOutcome,
    TargetRow,
)


class BatchStore:
    def __init__(self, db: Database):
        self._db = db

    # -- the API's operations ------------------------------------------------------------------

    async def submit(
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
        webhook: tuple | None = None,  # (url, event types, results)
    ) -> SubmitOutcome:
        """Idempotent reuse (unless `fresh`), the caps, the insert (linked to the job it
        retries, if any, with its webhook `(url, event types, results)`, if any) and the sweep
        of expired jobs."""
        job = NewJob(job_id, caller, caller_class, idem_key, targets, retry_of)
        caps = Caps(targets_per_job, jobs_per_caller, jobs_total)
        return await self._db.on_writer(
            lambda c: sql.submit(c, job, caps, now, ttl, fresh, webhook)
        )

    async def job(self, job_id: str) -> Job | None:
        return await self._db.on_reader(lambda c: sql.get_job(c, job_id))

    async def status(
        self, job_id: str, *, results: bool = True
    ) -> tuple[Job, list[TargetRow]] | None:
        """The job and its targets from one snapshot; `results=False` leaves results out."""
        return await self._db.on_reader(lambda c: sql.status(c, job_id, results))

    async def status_links(
        self, job_id: str, *, results: bool = True, page: ResultPage | None = None
    ) -> tuple[Job, list[TargetRow], str | None, list[str]] | None:
        """The status plus the job's retry links (`retry_of`, `retries`), one snapshot; with
        `page`, only the results that page holds."""

        def read(c):
            got = sql.status(c, job_id, results, page)
            return (*got, *history.links(c, job_id)) if got else None

        return await self._db.on_reader(read)

    async def list_jobs(
        self,
        caller: str,
        caller_class: str,
        *,
        now: float,
        ttl: float,
        limit: int,
        after: ListPosition | None = None,
    ) -> list[JobSummary]:
        """A page of the caller's unexpired jobs, live first, then newest first."""
        return await self._db.on_reader(
            lambda c: history.list_jobs(
                c, caller, caller_class, now=now, ttl=ttl, limit=limit, after=after
            )
        )

    async def touch(self, job: Job, now: float) -> bool:
        """Slide the job's lease after its owner read it (at most once a second)."""
        if not rules.touch_due(job, now):
            return False  # no write lock for a job read again within the second
        return await self._db.on_writer(lambda c: sql.touch(c, job.id, now))

    async def cancel(self, job_id: str, now: float) -> Job | None:
        """Flip a live job to `cancelled`; returns the job as it was before (None if unknown)."""
        return await self._db.on_writer(lambda c: sql.cancel(c, job_id, now))

    async def terminal_among(self, job_ids: Sequence[str]) -> list[str]:
        """Which of these jobs are terminal (or gone): what long-polling readers wait for."""
        return await self._db.on_reader(lambda c: sql.terminal_among(c, job_ids))

    # -- the worker's operations ---------------------------------------------------------------

    async def restart(self, now: float) -> int:
        """A worker becomes active: fail every running job with `restart` (queued ones wait
        for it); returns how many."""
        return await self._db.on_writer(lambda c: sql.restart(c, now))

    async def live_owners(self) -> list[tuple[str, str, str]]:
        """(id, caller, class) of live jobs in submit order: the worker's rotation, with
        whose each job is."""
        return await self._db.on_reader(sql.live_owners)

    async def live_jobs(self) -> list[str]:
        """Ids of live jobs in submit order."""
        return await self._db.on_reader(sql.live_jobs)

    async def sweep(self, now: float, ttl: float) -> int:
        """Delete expired jobs (lease + ttl not after `now`); returns how many."""
        return await self._db.on_writer(lambda c: sql.sweep(c, now, ttl))

    async def claim(self, job_id: str, now: float) -> Claim | None:
        """Take the job's next ready target, if the job is live and has nothing in flight."""
        return await self._db.write_now(lambda c: sql.claim(c, job_id, now))

    async def requeue(
        self,
        job_id: str,
        idx: int,
        *,
        retry_at: float,
        busy_since: float | None,
        now: float,
        reason: str | None = None,
    ) -> bool:
        """A target goes back to `pending`, to be tried again at `retry_at`; `busy_since` is
        when it was first busy (None: it has not been)."""
        return await self._db.write_now(
            lambda c: sql.requeue(
                c, job_id, idx, retry_at=retry_at, busy_since=busy_since, now=now, reason=reason
            )
        )

    async def finish(
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
        retryable: bool = False,
        retry_after: float | None = None,
        max_bytes: int | None = None,
        then_claim: Sequence[str] = (),
    ) -> Finished:
        """Store a fetched target, count it, and set the job's terminal status exactly once.

        With `max_bytes`, a stored result also enforces the byte budget in the same
        transaction, so no committed state is ever over it. With `then_claim`, the same
        transaction then claims the first of those jobs that has a ready target (`next`):
        the drain's usual next step, without a transaction of its own.
        """
        fetched = Fetched(status, outcome, seconds, result, error, hint, retryable, retry_after)
        return await self._db.write_now(
            lambda c: sql.finish(c, job_id, idx, fetched, now, max_bytes, then_claim)
        )
