"""The drain (SPEC §4.3 rules 2–5 and 8): the worker's tasks taking targets off the rotation.

Each drain task loops: take the next job in the rotation that has a ready target and nothing
in flight (`claim`), fetch that one target, store it, move on; when nothing is ready it waits
for whichever comes first — a nudge, the poll timer, the next retry time, or stop. The store
does the counting and the terminal status inside its transactions, so this module only decides
what to store. A store error is logged with the job id and the loop goes on.

The fetch is injected (`FetchFn`): the worker passes the per-target pipeline, tests pass fakes.
Each fetch runs in its own task so that shutdown can let it finish within the grace period and
then cancel it without cancelling the drain task that must still store the outcome.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import apsw
import orjson

from sift.auth import RESTRICTED
from sift.batch.rotation import Rotation
from sift.config import BatchConfig
from sift.errors import Busy, Cancelled, TargetError
from sift.status import TargetStatus
from sift.store import Claim, Store, StoreBusy, StoreError

FetchFn = Callable[[Claim], Awaitable[dict]]
INTERNAL_ERROR = "internal error"
SHUTDOWN_ERROR = "cancelled: the worker shut down"
SWEEP_EVERY = 60.0  # seconds between the worker's sweeps of expired jobs
STORE_ERRORS = (apsw.Error, StoreBusy, StoreError)
WRITE_ATTEMPTS = 3  # a target's outcome is worth a short retry: a lost write strands the job

log = logging.getLogger("sift.worker.drain")


class Runner:
    """`workers` drain tasks over one shared rotation; `run()` until `shutdown()`."""

    def __init__(
        self,
        store: Store,
        cfg: BatchConfig,
        fetch: FetchFn,
        *,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.cfg = cfg
        self.fetch = fetch
        self.clock = clock
        self.workers = max(1, min(2, cfg.workers))
        self.rotation = Rotation()
        self._wake = asyncio.Event()  # a nudge: refresh the rotation now
        self._stopping = asyncio.Event()  # stop taking targets
        self._cancelling = False  # the grace period is over: cancel fetches
        self._refreshed_at = -math.inf  # loop time of the last refresh
        self._swept_at = -math.inf
        self._scan_now = -math.inf  # the store time of the last scan's claims
        self._taken: set[str] = set()  # jobs one of our tasks is fetching
        self._fetches: set[asyncio.Task] = set()

    # -- control ------------------------------------------------------------------------------

    def nudge(self) -> None:
        """The listener's callback: a job was submitted or cancelled."""
        self._wake.set()

    def stop(self) -> None:
        """Stop taking targets; fetches in flight go on (see `shutdown`)."""
        self._stopping.set()

    @property
    def in_flight(self) -> int:
        return len(self._fetches)

    async def shutdown(self, grace: float) -> None:
        """Stop taking targets, let fetches in flight finish within `grace`, then cancel them.

        The drain tasks store the outcomes and return; await `run()` for that.
        """
        self.stop()
        if self._fetches:
            await asyncio.wait(set(self._fetches), timeout=grace)
        self._cancelling = True
        for task in list(self._fetches):
            task.cancel()

    async def run(self) -> None:
        """Run the drain tasks until they have all stopped; a crashed task ends the rest."""
        async with asyncio.TaskGroup() as tg:
            for i in range(self.workers):
                tg.create_task(self._drain(), name=f"drain-{i}")

    # -- the loop -----------------------------------------------------------------------------

    async def _drain(self) -> None:
        while not self._stopping.is_set():
            claim = await self._take()
            if claim is None:
                if not self._stopping.is_set():
                    await self._idle()
                continue
            try:
                await self._one(claim)
            finally:
                self._taken.discard(claim.job_id)

    async def _take(self) -> Claim | None:
        """Claim the next ready target in rotation order, or None when nothing is ready."""
        loop = asyncio.get_running_loop()
        if self._wake.is_set() or loop.time() >= self._refreshed_at + self.cfg.poll_interval:
            await self._refresh()
        self._scan_now = self.clock()
        for job_id in self.rotation.candidates():
            if self._stopping.is_set():
                return None
            if job_id in self._taken:
                continue
            self._taken.add(job_id)
            claim = await self._store(
                job_id, "claim", self.store.batch.claim, job_id, self._scan_now
            )
            if claim is not None:
                self.rotation.taken(job_id)
                return claim
            self._taken.discard(job_id)
        return None

    async def _refresh(self) -> None:
        loop = asyncio.get_running_loop()
        self._wake.clear()
        self._refreshed_at = loop.time()
        if loop.time() >= self._swept_at + SWEEP_EVERY:
            self._swept_at = loop.time()
            swept = await self._store(
                None, "sweep", self.store.batch.sweep, self.clock(), self.cfg.ttl
            )
            if swept:
                log.info("batch: swept %d expired job(s)", swept)
        live = await self._store(None, "live jobs", self.store.batch.live_jobs, read=True)
        if live is not None:
            self.rotation.replace(live)

    async def _idle(self) -> None:
        """Wait for a nudge, the poll timer, the next retry time, or stop; then refresh."""
        timeout = self.cfg.poll_interval
        retry_at = await self._store(None, "next retry", self.store.batch.next_retry_at, read=True)
        # A retry time already due at the scan belongs to a job in flight: its task goes on.
        if retry_at is not None and retry_at > self._scan_now:
            timeout = min(timeout, max(0.0, retry_at - self.clock()))
        waits = [
            asyncio.ensure_future(self._wake.wait()),
            asyncio.ensure_future(self._stopping.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        self._refreshed_at = -math.inf

    # -- one target ---------------------------------------------------------------------------

    async def _one(self, claim: Claim) -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        task = asyncio.create_task(self.fetch(claim), name=f"fetch {claim.job_id}/{claim.idx}")
        self._fetches.add(task)
        if self._cancelling:
            task.cancel()
        try:
            await asyncio.wait({task})
        finally:
            self._fetches.discard(task)
            if not task.done():  # the drain task itself was cancelled
                task.cancel()
        seconds = loop.time() - t0
        now = self.clock()
        if task.cancelled():
            await self._finish(claim, Cancelled(SHUTDOWN_ERROR), seconds, now)
            return
        exc = task.exception()
        if exc is None:
            try:
                result = orjson.dumps(task.result()).decode()
            except TypeError as e:
                exc = e
            else:
                await self._finish(claim, None, seconds, now, result=result)
                return
        if isinstance(exc, Busy):
            await self._busy(claim, exc, seconds, now)
        elif isinstance(exc, TargetError):
            await self._finish(claim, exc, seconds, now)
        else:
            log.warning(
                "batch: job %s target %d: internal error (%s)",
                claim.job_id,
                claim.idx,
                type(exc).__name__,
            )
            await self._finish(claim, TargetError(INTERNAL_ERROR, hint=None), seconds, now)

    async def _busy(self, claim: Claim, exc: Busy, seconds: float, now: float) -> None:
        busy_since = claim.busy_since if claim.busy_since is not None else now
        if now - busy_since > self.cfg.retry_for:
            await self._finish(claim, exc, seconds, now)
            return
        await self._write(
            claim.job_id,
            "requeue",
            functools.partial(
                self.store.batch.requeue,
                claim.job_id,
                claim.idx,
                retry_at=now + self.cfg.retry_wait,
                busy_since=busy_since,
                now=now,
            ),
        )
        log.debug("batch: job %s target %d busy, retry later", claim.job_id, claim.idx)

    async def _finish(
        self,
        claim: Claim,
        exc: TargetError | None,
        seconds: float,
        now: float,
        *,
        result: str | None = None,
    ) -> None:
        if exc is None:
            status, outcome, error, hint = TargetStatus.DONE, "ok", None, None
        else:
            status, outcome, error, hint = TargetStatus.FAILED, exc.outcome, exc.msg, exc.hint
        finished = await self._write(
            claim.job_id,
            "finish",
            functools.partial(
                self.store.batch.finish,
                claim.job_id,
                claim.idx,
                status=str(status),
                outcome=outcome or "other",
                seconds=seconds,
                now=now,
                result=result,
                error=error,
                hint=hint,
            ),
        )
        if finished is None:
            return
        shown = "-" if claim.caller_class == RESTRICTED else outcome
        if not finished.stored:
            log.info("batch: job %s target %d not stored (gone)", claim.job_id, claim.idx)
            return
        log.info("batch: job %s target %d %s (%s)", claim.job_id, claim.idx, status, shown)
        if finished.terminal:
            log.info("batch: job %s %s", claim.job_id, finished.terminal)
        if result is not None:
            evicted = await self._store(
                claim.job_id, "evict", self.store.batch.evict_oldest, self.cfg.max_bytes
            )
            if evicted:
                log.info("batch: byte budget evicted %d job(s)", evicted)

    # -- store calls --------------------------------------------------------------------------

    async def _store(self, job_id: str | None, what: str, fn, *args, read: bool = False) -> Any:
        """One store call off the event loop; a store error is logged and becomes None."""
        run = self.store.db.run_read if read else self.store.db.run
        try:
            return await run(fn, *args)
        except STORE_ERRORS as e:
            log.warning(
                "batch: store error (%s) on %s, job %s", type(e).__name__, what, job_id or "-"
            )
            return None

    async def _write(self, job_id: str, what: str, fn: Callable[[], Any]) -> Any:
        """A target's outcome: retried a little, since a lost write leaves the job stranded."""
        for attempt in range(WRITE_ATTEMPTS):
            if attempt:
                await asyncio.sleep(0.2 * attempt)
            try:
                return await self.store.db.run(fn)
            except STORE_ERRORS as e:
                log.warning(
                    "batch: store error (%s) on %s, job %s (attempt %d)",
                    type(e).__name__,
                    what,
                    job_id,
                    attempt + 1,
                )
        return None
