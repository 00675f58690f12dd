"""The drain's store calls (docs/WORKER.md §Store errors): a read or claim that fails is
logged and skipped; a target's outcome is retried until it is stored, since a lost write would
strand its job with a target `running`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sift.config import BatchConfig
from sift.log import batch_event
from sift.store import STORE_ERRORS, Claim, Store
from worker.outcome import Outcome, log_stored

T = TypeVar("T")
WRITE_ATTEMPTS = 3  # attempts at a target's outcome once the worker is stopping
WRITE_BACKOFF_MAX = 2.0  # seconds between attempts at most

log = logging.getLogger("sift.worker.drain")


class Writes:
    def __init__(self, store: Store, cfg: BatchConfig, stopping: Callable[[], bool]):
        self.store = store
        self.cfg = cfg
        self.stopping = stopping

    async def attempt(self, job_id: str | None, what: str, call: Awaitable[T]) -> T | None:
        """One store operation; a store error is logged and becomes None."""
        try:
            return await call
        except STORE_ERRORS as e:
            batch_event(
                log,
                f"batch store error on {what}",
                level=logging.WARNING,
                job_id=job_id or "-",
                error_type=type(e).__name__,
            )
            return None

    async def until_stored(
        self, job_id: str, what: str, op: Callable[[], Awaitable[T]]
    ) -> T | None:
        """Retried with a back-off up to `WRITE_BACKOFF_MAX`; once the worker is stopping it
        gives up after `WRITE_ATTEMPTS` (the next worker marks the job failed: `restart`)."""
        attempt = 0
        while True:
            try:
                return await op()
            except STORE_ERRORS as e:
                attempt += 1
                batch_event(
                    log,
                    f"batch store error on {what}",
                    level=logging.WARNING,
                    job_id=job_id,
                    error_type=type(e).__name__,
                    count=attempt,
                )
                if self.stopping() and attempt >= WRITE_ATTEMPTS:
                    return None
                await asyncio.sleep(min(WRITE_BACKOFF_MAX, 0.2 * attempt))

    async def put_back(
        self,
        claim: Claim,
        retry_at: float,
        busy_since: float | None,
        now: float,
        reason: str | None = None,
    ) -> None:
        """The target goes back to `pending`, ready at `retry_at`; its job waits for it (it
        stays serial). Only a busy answer starts or keeps the `busy_since` clock: waiting for
        room or for the site is not being busy. `reason` is what its status says it waits
        for (docs/API.md §Waiting targets; a host's wait carries its own)."""
        await self.until_stored(
            claim.job_id,
            "requeue",
            lambda: self.store.batch.requeue(
                claim.job_id,
                claim.idx,
                retry_at=retry_at,
                busy_since=busy_since,
                now=now,
                reason=reason,
            ),
        )
        batch_event(
            log,
            "batch target put back, retry later",
            level=logging.DEBUG,
            job_id=claim.job_id,
            idx=claim.idx,
        )

    async def finish(
        self, claim: Claim, outcome: Outcome, now: float, then_claim: list[str]
    ) -> Claim | None:
        """Store the target; the same transaction claims the first of `then_claim` that the
        store's rules allow, which is returned."""
        err = outcome.error
        finished = await self.until_stored(
            claim.job_id,
            "finish",
            lambda: self.store.batch.finish(
                claim.job_id,
                claim.idx,
                status=outcome.status,
                outcome=outcome.label,
                seconds=outcome.seconds,
                now=now,
                result=outcome.result,
                error=err.msg if err else None,
                hint=err.hint if err else None,
                retryable=err.retryable if err else False,
                retry_after=err.retry_after if err else None,
                max_bytes=self.cfg.max_bytes,
                then_claim=then_claim,
            ),
        )
        if finished is None:
            return None
        log_stored(claim, outcome, finished)
        return finished.next
