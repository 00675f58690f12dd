"""The batch store on PostgreSQL: the same awaitable operations as `sift.store.batch`.

Each operation is one transaction on a pooled connection running one named query of
`pg.batch_sql`; the driver is async, so no operation needs a thread. `worker` is this process's
worker id (None in an API process): claims record it, so the restart rule can tell whose
targets are in flight (docs/WORKER.md §Several workers). The drain's claim and finish are one
statement each (a finish held back on a job's last target takes a second transaction), run
pipelined and read after COMMIT: one round trip (docs/WORKER.md §The store's transactions).
"""

from __future__ import annotations

from collections.abc import Sequence

from sift.store import rules
from sift.store.pg import batch_history as history
from sift.store.pg import batch_sql as sql
from sift.store.pg.db import PgDatabase
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


class PgBatchStore:
    def __init__(self, db: PgDatabase, *, worker: str | None = None, dead_after: float = 15.0):
        self._db = db
        self.worker = worker
        self.dead_after = dead_after

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
        """A reuse first, in one statement without the submit lock (most resubmits end
        there), then the whole submit under it."""
        if not fresh:
            reused = await self._db.statement(lambda c: sql.reuse(c, caller, idem_key, now, ttl))
            if reused is not None:
                return reused
        job = NewJob(job_id, caller, caller_class, idem_key, targets, retry_of)
        caps = Caps(targets_per_job, jobs_per_caller, jobs_total)
        return await self._db.transaction(
            lambda c: sql.submit(c, job, caps, now, ttl, fresh, webhook)
        )

    async def status_links(
        self, job_id: str, *, results: bool = True, page: ResultPage | None = None
    ) -> tuple[Job, list[TargetRow], str | None, list[str]] | None:
        """The status plus the job's retry links (`retry_of`, `retries`), one statement; with
        `page`, only the results that page holds."""
        return await self._db.statement(lambda c: sql.status(c, job_id, results, page, links=True))

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
        return await self._db.statement(
            lambda c: history.list_jobs(
                c, caller, caller_class, now=now, ttl=ttl, limit=limit, after=after
            )
        )

    async def job(self, job_id: str) -> Job | None:
        return await self._db.statement(lambda c: sql.get_job(c, job_id))

    async def status(
        self, job_id: str, *, results: bool = True
    ) -> tuple[Job, list[TargetRow]] | None:
        return await self._db.statement(lambda c: sql.status(c, job_id, results))

    async def touch(self, job: Job, now: float) -> bool:
        if not rules.touch_due(job, now):
            return False
        return await self._db.statement(lambda c: sql.touch(c, job.id, now))

    async def cancel(self, job_id: str, now: float) -> Job | None:
        return await self._db.transaction(lambda c: sql.cancel(c, job_id, now))

    async def terminal_among(self, job_ids: Sequence[str]) -> list[str]:
        return await self._db.statement(lambda c: sql.terminal_among(c, job_ids))

    # -- the worker's operations ---------------------------------------------------------------

    async def restart(self, now: float) -> int:
        """A worker becomes active: unlike the SQLite engine's singleton, other workers may be
        draining, so only targets in flight on a silent worker fail (`reap`)."""
        return await self.reap(now)

    async def reap(self, now: float) -> int:
        """Fail every target in flight on a worker silent for `dead_after` by the database's
        clock (`now` dates the failure only); how many failed."""
        lost = await self._db.statement(lambda c: sql.lost_targets(c, self.dead_after))
        failed = 0
        for job_id, idx in lost:
            done = await self._db.transaction(
                lambda c, j=job_id, i=idx: sql.fail_lost(c, j, i, now, self.dead_after)
            )
            failed += done.stored
        await self._db.statement(lambda c: sql.forget_dead(c, self.dead_after))
        return failed

    async def live_owners(self) -> list[tuple[str, str, str]]:
        return await self._db.statement(sql.live_owners)

    async def live_jobs(self) -> list[str]:
        return await self._db.statement(sql.live_jobs)

    async def sweep(self, now: float, ttl: float) -> int:
        return await self._db.statement(lambda c: sql.sweep(c, now, ttl))

    async def claim(self, job_id: str, now: float) -> Claim | None:
        return await self._db.transaction(
            lambda c: sql.claim(c, job_id, now, self.worker), pipelined=True
        )

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
        return await self._db.transaction(
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
        """As `BatchOps.finish`; a chained claim records this worker."""
        fetched = Fetched(status, outcome, seconds, result, error, hint, retryable, retry_after)
        return await self._db.transaction(
            lambda c: sql.finish(c, job_id, idx, fetched, now, max_bytes, then_claim, self.worker),
            pipelined=True,
        )
