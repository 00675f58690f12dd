"""The drain (SPEC §4.3 rules 2–5 and 8): the worker's tasks taking targets off the rotation.

Each drain task loops: take the next job in the rotation that has a ready target and nothing
in flight (`claim`), fetch that one target, store it, move on; the store of one target also
claims the next in the same transaction (`finish(..., then_claim=…)`), one commit per step
instead of two. When nothing is ready a task waits for whichever comes first — a nudge, the
poll timer, the next retry time, or stop. The store
does the counting and the terminal status inside its transactions, so this module only decides
what to store. A store error is logged with the job id and the loop goes on.

A busy target goes back to `pending` with a retry time, and its job waits for it: target i+1
never starts before target i is stored, retries included (the store's `claim` refuses such a
job too). The runner also keeps the waiting jobs and their retry times in memory, which spares
a claim transaction per waiting job per scan and tells an idle task how long to wait.

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

import orjson

from sift.auth import RESTRICTED
from sift.batch.hosts import HostRoom, host_of
from sift.batch.rotation import Rotation
from sift.config import BatchConfig
from sift.errors import Busy, Cancelled, HostWait, TargetError
from sift.gates import Gates
from sift.log import batch_event, batch_scope
from sift.status import TargetStatus
from sift.store import STORE_ERRORS, Claim, Store, StoreBusy

FetchFn = Callable[[Claim], Awaitable[dict]]
INTERNAL_ERROR = "internal error"
SHUTDOWN_ERROR = "cancelled: the worker shut down"
SWEEP_EVERY = 60.0  # seconds between the worker's sweeps of expired jobs
WRITE_ATTEMPTS = 3  # attempts at a target's outcome once the worker is stopping
WRITE_BACKOFF_MAX = 2.0  # seconds between attempts at most

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
        gates: Gates | None = None,
    ):
        """`gates`: the limits the fetches acquire, probed (never held) to skip a job whose
        next target has no room; None for fetches that take no gates (tests)."""
        self.store = store
        self.cfg = cfg
        self.fetch = fetch
        self.clock = clock
        self.workers = max(1, min(2, cfg.workers))
        self.rotation = Rotation()
        self.room = HostRoom(gates)
        self._dirty = True  # the rotation needs a refresh from the store (a nudge, the start)
        self._gen = 0  # bumped when a refresh brings new jobs
        self._sleepers: set[asyncio.Event] = set()  # one per idle drain task
        self._stopping = False  # stop taking targets
        self._cancelling = False  # the grace period is over: cancel fetches
        self._refreshed_at = -math.inf  # loop time of the last refresh
        self._swept_at = -math.inf
        self._taken: set[str] = set()  # jobs one of our tasks is fetching
        self._waiting: dict[str, float] = {}  # job -> when its busy target may be retried
        self._fetches: set[asyncio.Task] = set()

    # -- control ------------------------------------------------------------------------------

    def nudge(self) -> None:
        """The listener's callback: a job was submitted or cancelled."""
        self._dirty = True
        self._poke()

    def slot_freed(self) -> None:
        """A gate slot was given back (here, or in the API process): a skipped job may go."""
        if self.room.any_gated:
            self._poke()

    def stop(self) -> None:
        """Stop taking targets; fetches in flight go on (see `shutdown`)."""
        self._stopping = True
        self._poke()

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
        claim: Claim | None = None
        # A target claimed together with the previous one's finish is in flight: it runs even
        # when a stop came during that write (shutdown lets it finish within the grace period).
        while claim is not None or not self._stopping:
            if claim is None:
                await self._refresh_if_due()
                gen, scanned_at = self._gen, self.clock()
                claim = await self._take(scanned_at)
                if claim is None:
                    await self._idle(gen, scanned_at)
                    continue
            following: Claim | None = None
            try:
                following = await self._one(claim)
            finally:
                if following is None or following.job_id != claim.job_id:
                    self._taken.discard(claim.job_id)
            self.slot_freed()  # the fetch gave its slots back: a skipped job may go now
            if following is not None and not await self._admit(following, self.clock()):
                following = None
            claim = following

    async def _take(self, now: float) -> Claim | None:
        """Claim the next ready target in rotation order, or None when nothing is ready."""
        for job_id in self.rotation.candidates():
            if self._stopping:
                return None
            if not self._ready(job_id, now):
                continue
            self._taken.add(job_id)
            claim = await self._store(
                job_id, "claim", self.store.batch.claim, job_id, now, inline=True
            )
            if claim is not None and await self._admit(claim, now):
                return claim
            self._taken.discard(job_id)
        return None

    async def _admit(self, claim: Claim, now: float) -> bool:
        """Keep a claimed target whose host has room; else put it back as it was and skip
        its job, which keeps its place in the rotation."""
        host = host_of(claim.url)
        if not self.room.has_room(claim.caller, host, now):
            self.room.remember(claim.job_id, claim.caller, host)
            self._taken.discard(claim.job_id)
            await self._put_back(claim, now, claim.busy_since, now)
            return False
        self.room.forget(claim.job_id)
        self._taken.add(claim.job_id)
        self._waiting.pop(claim.job_id, None)
        self.rotation.taken(claim.job_id)
        return True

    def _next_candidates(self, current: str, now: float) -> list[str]:
        """The jobs `_take` would try next, in order, for a claim chained to a finish."""
        if self._stopping:
            return []
        return [j for j in self.rotation.candidates() if self._ready(j, now, mine=current)]

    def _ready(self, job_id: str, now: float, *, mine: str | None = None) -> bool:
        """Worth a claim: no task of ours holds the job (`mine` is the caller's own) and its
        busy target's retry time has come."""
        held = job_id in self._taken and job_id != mine
        if held or self._waiting.get(job_id, -math.inf) > now:
            return False
        return not self.room.blocked(job_id, now)

    async def _refresh_if_due(self) -> None:
        """Re-read the live jobs after a nudge, or when the poll interval has passed."""
        loop = asyncio.get_running_loop()
        if not self._dirty and loop.time() < self._refreshed_at + self.cfg.poll_interval:
            return
        self._dirty = False
        self._refreshed_at = loop.time()
        if loop.time() >= self._swept_at + SWEEP_EVERY:
            self._swept_at = loop.time()
            swept = await self._store(
                None, "sweep", self.store.batch.sweep, self.clock(), self.cfg.ttl
            )
            if swept:
                batch_event(log, "batch expired jobs swept", count=swept)
        live = await self._store(None, "live jobs", self.store.batch.live_jobs, read=True)
        if live is None:
            return
        self._waiting = {j: t for j, t in self._waiting.items() if j in set(live)}
        self.room.retain(set(live), self.clock())
        if self.rotation.replace(live):
            self._gen += 1
            self._poke()  # an idle sibling task may take the new job

    async def _idle(self, gen: int, scanned_at: float) -> None:
        """Wait for a nudge, the poll timer, the next retry time, or stop."""
        if self._stopping or self._dirty or self._gen != gen:
            return  # something changed since the scan: scan again
        timeout = self.cfg.poll_interval
        # A retry time already due at the scan was tried then; only later ones shorten the wait.
        later = [t for t in self._waiting.values() if t > scanned_at]
        host_wait = self.room.next_wait_end(scanned_at)
        if host_wait is not None:
            later.append(host_wait)
        if later:
            timeout = min(timeout, max(0.0, min(later) - self.clock()))
        woken = asyncio.Event()
        self._sleepers.add(woken)
        try:
            await asyncio.wait_for(woken.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._sleepers.discard(woken)

    def _poke(self) -> None:
        for woken in self._sleepers:
            woken.set()

    # -- one target ---------------------------------------------------------------------------

    async def _one(self, claim: Claim) -> Claim | None:
        """Fetch and store one target; returns the next target when one was claimed with it."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        task = asyncio.create_task(self._fetch(claim), name=f"fetch {claim.job_id}/{claim.idx}")
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
            return await self._finish(claim, Cancelled(SHUTDOWN_ERROR), seconds, now)
        exc = task.exception()
        if exc is None:
            try:
                result = orjson.dumps(task.result()).decode()
            except TypeError as e:
                exc = e
            else:
                return await self._finish(claim, None, seconds, now, result=result)
        if isinstance(exc, StoreBusy):  # the pipeline's cache write waited out another lock
            exc = Busy(exc.msg)
        if isinstance(exc, HostWait):
            host = host_of(claim.url)
            self.room.wait(host, exc.retry_after or now)
            self.room.remember(claim.job_id, claim.caller, host)
            return await self._put_back(claim, now, claim.busy_since, now)
        if isinstance(exc, Busy):
            return await self._busy(claim, exc, seconds, now)
        if isinstance(exc, TargetError):
            if exc.retry_after is not None and "upstream_status" in exc.extra:
                self.room.wait(host_of(claim.url), exc.retry_after)  # the site said when
            return await self._finish(claim, exc, seconds, now)
        batch_event(
            log,
            "batch target internal error",
            level=logging.WARNING,
            job_id=claim.job_id,
            idx=claim.idx,
            error_type=type(exc).__name__,
        )
        return await self._finish(claim, TargetError(INTERNAL_ERROR, hint=None), seconds, now)

    async def _fetch(self, claim: Claim) -> dict:
        with batch_scope():  # the pipeline's log lines name no URL or host for batch work
            return await self.fetch(claim)

    async def _busy(self, claim: Claim, exc: Busy, seconds: float, now: float) -> Claim | None:
        busy_since = claim.busy_since if claim.busy_since is not None else now
        if now - busy_since > self.cfg.retry_for:
            exc.retry_after = now + self.cfg.retry_wait
            return await self._finish(claim, exc, seconds, now)
        host = host_of(claim.url)
        if not self.room.has_room(claim.caller, host, now):
            # A gate filled between the probe and the fetch (another process): skip the job
            # until a slot frees, like a job skipped before its claim.
            self.room.remember(claim.job_id, claim.caller, host)
            return await self._put_back(claim, now, busy_since, now)
        # Not the gates (the database was busy): try again after `retry_wait`.
        self._waiting[claim.job_id] = now + self.cfg.retry_wait
        return await self._put_back(claim, now + self.cfg.retry_wait, busy_since, now)

    async def _put_back(
        self, claim: Claim, retry_at: float, busy_since: float | None, now: float
    ) -> None:
        """The target goes back to `pending`, ready at `retry_at`; its job waits for it (it
        stays serial) and the task goes on with other jobs. Only a busy answer starts or keeps
        the `busy_since` clock: waiting for room or for the site is not being busy."""
        await self._write(
            claim.job_id,
            "requeue",
            functools.partial(
                self.store.batch.requeue,
                claim.job_id,
                claim.idx,
                retry_at=retry_at,
                busy_since=busy_since,
                now=now,
            ),
        )
        batch_event(
            log,
            "batch target put back, retry later",
            level=logging.DEBUG,
            job_id=claim.job_id,
            idx=claim.idx,
        )
        return None

    async def _finish(
        self,
        claim: Claim,
        exc: TargetError | None,
        seconds: float,
        now: float,
        *,
        result: str | None = None,
    ) -> Claim | None:
        """Store the target; the same transaction claims the next one in rotation order."""
        retryable, retry_after = False, None
        if exc is None:
            status, outcome, error, hint = TargetStatus.DONE, "ok", None, None
        else:
            status, outcome, error, hint = TargetStatus.FAILED, exc.outcome, exc.msg, exc.hint
            retryable, retry_after = exc.retryable, exc.retry_after
        if not self._stopping:
            await self._refresh_if_due()  # a job submitted meanwhile takes its turn
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
                retryable=retryable,
                retry_after=retry_after,
                max_bytes=self.cfg.max_bytes,
                then_claim=self._next_candidates(claim.job_id, now),
            ),
        )
        if finished is None:
            return None
        if not finished.stored:
            batch_event(
                log, "batch target not stored: job gone", job_id=claim.job_id, idx=claim.idx
            )
            return finished.next
        # A restricted caller's line carries no reason, not even the outcome's category.
        shown = {} if claim.caller_class == RESTRICTED else {"outcome": outcome}
        batch_event(
            log,
            "batch target stored",
            job_id=claim.job_id,
            idx=claim.idx,
            status=str(status),
            **shown,
        )
        if finished.terminal:
            batch_event(log, "batch job finished", job_id=claim.job_id, status=finished.terminal)
        if finished.evicted:
            batch_event(log, "batch byte budget evicted jobs", count=finished.evicted)
        return finished.next

    # -- store calls --------------------------------------------------------------------------

    async def _store(
        self, job_id: str | None, what: str, fn, *args, read: bool = False, inline: bool = False
    ) -> Any:
        """One store call off the event loop (`inline`: on it when that costs no wait, see
        `Database.run_now`); a store error is logged and becomes None."""
        db = self.store.db
        run = db.run_read if read else db.run_now if inline else db.run
        try:
            return await run(fn, *args)
        except STORE_ERRORS as e:
            batch_event(
                log,
                f"batch store error on {what}",
                level=logging.WARNING,
                job_id=job_id or "-",
                error_type=type(e).__name__,
            )
            return None

    async def _write(self, job_id: str, what: str, fn: Callable[[], Any]) -> Any:
        """A target's outcome: retried until stored, since a lost write strands the job.

        Backs off up to `WRITE_BACKOFF_MAX` between attempts. Once the worker is stopping it
        gives up after `WRITE_ATTEMPTS`: the next worker marks the job failed (`restart`).
        """
        attempt = 0
        while True:
            try:
                return await self.store.db.run_now(fn)
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
                if self._stopping and attempt >= WRITE_ATTEMPTS:
                    return None
                await asyncio.sleep(min(WRITE_BACKOFF_MAX, 0.2 * attempt))
