"""The drain (docs/WORKER.md §Rotation and drain, §Store errors): the worker's tasks taking
targets off the rotation.

Each drain task loops: take the next job in the rotation that has a ready target and nothing
in flight (`claim`), fetch that one target, store it, move on; the store of one target also
claims the next in the same transaction (`finish(..., then_claim=…)`), one commit per step
instead of two. When nothing is ready a task waits for whichever comes first: a nudge, the poll
timer, the next retry time, or stop. The store does the counting and the terminal status inside
its transactions, so this module only decides what to store. A store error is logged with the
job id and the loop goes on.

A job whose next target's host has no room (full gates, a Crawl-delay or Retry-After wait) is
skipped and keeps its place; a task waits only when no job has room, and is woken when a slot
frees (docs/WORKER.md §The scheduler). A target that meets such a wait, or busy gates, goes
back to `pending` and its job waits for it: target i+1 never starts before target i is stored,
retries included (the store's `claim` refuses such a job too).

Jobs are tried in the order of their callers' recent use of the worker, the rotation's turn
order among equals (docs/WORKER.md §Fair shares between callers), and a target still running
after `hand_off_after` is handed off: it finishes and is stored on its own, its job (and every
job of its caller) waits for it, and the drain task goes on with other callers' jobs. So a
caller whose targets take seconds (a bomb that fails only at its limit, a slow site) cannot
hold the drain; at most `slow_targets` targets run handed off, one per caller.

The fetch is injected (`FetchFn`): the worker passes the per-target pipeline, tests pass their
own. Each fetch runs in its own task so that shutdown can let it finish within the grace period
and then cancel it without cancelling the drain task that must still store the outcome.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeVar

import orjson

from sift.auth import RESTRICTED
from sift.config import BatchConfig
from sift.errors import Busy, Cancelled, GatesFull, HostWait, TargetError
from sift.gates import Gates
from sift.log import batch_event, batch_scope
from sift.status import TargetStatus
from sift.store import STORE_ERRORS, Claim, Finished, Store, StoreBusy
from worker.fairness import Usage, Who
from worker.hosts import HostRoom, host_of
from worker.rotation import Rank, Rotation

FetchFn = Callable[[Claim], Awaitable[dict]]
T = TypeVar("T")
BUSY = "busy"  # an outcome that is not stored: the target goes back to wait
INTERNAL_ERROR = "internal error"
SHUTDOWN_ERROR = "cancelled: the worker shut down"
SWEEP_EVERY = 60.0  # seconds between the worker's sweeps of expired jobs
WRITE_ATTEMPTS = 3  # attempts at a target's outcome once the worker is stopping
WRITE_BACKOFF_MAX = 2.0  # seconds between attempts at most

log = logging.getLogger("sift.worker.drain")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one fetch comes to: how the target is stored, or that it was only busy."""

    status: str  # done | failed | BUSY
    label: str  # the metrics outcome
    seconds: float
    result: str | None = None
    error: TargetError | None = None


def judge(task: asyncio.Task, seconds: float, claim: Claim) -> Outcome:
    """The outcome of a finished fetch task (docs/WORKER.md §Rotation and drain, Outcomes)."""
    if task.cancelled():
        exc: BaseException | None = Cancelled(SHUTDOWN_ERROR)
    else:
        exc = task.exception()
    if exc is None:
        try:
            result = orjson.dumps(task.result()).decode()
        except TypeError as e:
            exc = e
        else:
            return Outcome(str(TargetStatus.DONE), "ok", seconds, result=result)
    if isinstance(exc, StoreBusy):  # the pipeline's cache write waited out another lock
        exc = Busy(exc.msg)
    if isinstance(exc, Busy):
        return Outcome(BUSY, exc.outcome or "other", seconds, error=exc)
    if not isinstance(exc, TargetError):
        batch_event(
            log,
            "batch target internal error",
            level=logging.WARNING,
            job_id=claim.job_id,
            idx=claim.idx,
            error_type=type(exc).__name__,
        )
        exc = TargetError(INTERNAL_ERROR, hint=None)
    return Outcome(str(TargetStatus.FAILED), exc.outcome or "other", seconds, error=exc)


def log_stored(claim: Claim, outcome: Outcome, finished: Finished) -> None:
    """The lines a stored target gives: stored (or not), the job's end, an eviction."""
    if not finished.stored:
        batch_event(log, "batch target not stored: job gone", job_id=claim.job_id, idx=claim.idx)
        return
    # A restricted caller's line carries no reason, not even the outcome's category.
    shown = {} if claim.caller_class == RESTRICTED else {"outcome": outcome.label}
    batch_event(
        log,
        "batch target stored",
        job_id=claim.job_id,
        idx=claim.idx,
        status=outcome.status,
        **shown,
    )
    if finished.terminal:
        batch_event(log, "batch job finished", job_id=claim.job_id, status=finished.terminal)
    if finished.evicted:
        batch_event(log, "batch byte budget evicted jobs", count=finished.evicted)


def who_of(claim: Claim) -> Who:
    return (claim.caller, claim.caller_class)


class Runner:
    """`cfg.drain_tasks` drain tasks over one shared rotation; `run()` until `shutdown()`."""

    def __init__(
        self,
        store: Store,
        cfg: BatchConfig,
        fetch: FetchFn,
        *,
        clock: Callable[[], float] = time.time,
        gates: Gates | None = None,
        usage: Usage | None = None,
    ):
        """`gates`: the limits the fetches acquire, probed (never held) to skip a job whose
        next target has no room; None for fetches that take no gates (tests). `usage`: the
        callers' recent use (tests pass one with a narrow band)."""
        self.store = store
        self.cfg = cfg
        self.fetch = fetch
        self.clock = clock
        self.rotation = Rotation()
        self.room = HostRoom(gates)
        self._dirty = True  # the rotation needs a refresh from the store (a nudge, the start)
        self._gen = 0  # bumped when a refresh brings new jobs
        self._sleepers: set[asyncio.Event] = set()  # one per idle drain task
        self._stopping = False  # stop taking targets
        self._cancelling = False  # the grace period is over: cancel fetches
        self._refreshed_at = -math.inf  # loop time of the last refresh
        self._swept_at = -math.inf
        self._fetches: set[asyncio.Task] = set()
        self.usage = Usage() if usage is None else usage
        self._owner: dict[str, Who] = {}  # live job -> its caller, from the last refresh
        self._slow: dict[Who, asyncio.Task] = {}  # callers with a handed-off target in flight

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
            for i in range(self.cfg.drain_tasks):
                tg.create_task(self._drain(), name=f"drain-{i}")
        # Handed-off targets store their own outcomes (shutdown cancels their fetches).
        await asyncio.gather(*self._slow.values(), return_exceptions=True)

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
            handed = False
            try:
                following, handed = await self._one(claim)
            finally:
                if not handed and (following is None or following.job_id != claim.job_id):
                    self.rotation.release(claim.job_id)
            if handed:
                claim = None
                continue
            if following is not None and not await self._admit(following, self.clock()):
                following = None
            if following is None or host_of(following.url) != host_of(claim.url):
                # The fetch gave its slots back and this task does not take them again: a
                # skipped job may go now. (Waking a sibling for a slot this task is about to
                # take would only cost it a claim and a busy answer.)
                self.slot_freed()
            claim = following

    async def _take(self, now: float) -> Claim | None:
        """Claim the next ready target in rotation order, or None when nothing is ready."""
        for job_id in self.rotation.candidates(self._rank()):
            if self._stopping:
                return None
            if not self._ready(job_id, now):
                continue  # a sibling task took it during this scan's awaits, or no room
            self.rotation.hold(job_id)  # a sibling task skips it while the claim is written
            claim = await self._try(job_id, "claim", self.store.batch.claim(job_id, now))
            if claim is not None and await self._admit(claim, now):
                return claim
            self.rotation.release(job_id)
        return None

    def _ready(self, job_id: str, now: float, *, mine: str | None = None) -> bool:
        """Worth a claim: the rotation's test, its caller has no handed-off target in flight,
        and its next target's host has room as far as the drain knows (docs/WORKER.md §The
        scheduler)."""
        return (
            self.rotation.is_ready(job_id, now, mine=mine)
            and self._owner.get(job_id) not in self._slow
            and not self.room.blocked(job_id, now)
        )

    def _rank(self) -> Rank:
        """Jobs by their callers' recent use, least first (docs/WORKER.md §Fair shares)."""
        ranks = self.usage.ranks(self._owner.values(), asyncio.get_running_loop().time())
        return lambda job_id: ranks.get(self._owner.get(job_id), 0.0)

    async def _admit(self, claim: Claim, now: float) -> bool:
        """Keep a claimed target whose host has room; else put it back as it was and skip
        its job, which keeps its place in the rotation."""
        host = host_of(claim.url)
        if not self.room.has_room(claim.caller, host, now):
            self.room.remember(claim.job_id, claim.caller, host)
            self.rotation.release(claim.job_id)
            await self._put_back(claim, now, claim.busy_since, now)
            return False
        self.room.forget(claim.job_id)
        self.rotation.claimed(claim.job_id)
        return True

    async def _refresh_if_due(self) -> None:
        """Re-read the live jobs after a nudge, or when the poll interval has passed."""
        loop = asyncio.get_running_loop()
        if not self._dirty and loop.time() < self._refreshed_at + self.cfg.poll_interval:
            return
        self._dirty = False
        self._refreshed_at = loop.time()
        if loop.time() >= self._swept_at + SWEEP_EVERY:
            self._swept_at = loop.time()
            swept = await self._try(
                None, "sweep", self.store.batch.sweep(self.clock(), self.cfg.ttl)
            )
            if swept:
                batch_event(log, "batch expired jobs swept", count=swept)
        owned = await self._try(None, "live jobs", self.store.batch.live_owners())
        if owned is None:
            return
        live = [job for job, _, _ in owned]
        self.room.retain(set(live), self.clock())
        self._owner = {job: (caller, cls) for job, caller, cls in owned}
        self.usage.prune(loop.time())
        if self.rotation.replace(live):
            self._gen += 1
            self._poke()  # an idle sibling task may take the new job

    async def _idle(self, gen: int, scanned_at: float) -> None:
        """Wait for a nudge, the poll timer, the next retry time, or stop."""
        if self._stopping or self._dirty or self._gen != gen:
            return  # something changed since the scan: scan again
        timeout = self.cfg.poll_interval
        ends = [self.rotation.next_retry(scanned_at), self.room.next_wait_end(scanned_at)]
        later = [t for t in ends if t is not None]
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

    async def _one(self, claim: Claim) -> tuple[Claim | None, bool]:
        """Fetch and store one target. Returns the next target when one was claimed with it,
        and whether the target was handed off instead (it stores itself)."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        task = self._start(claim)
        if await self._wait_or_hand_off(claim, task, t0):
            return None, True
        return await self._settle(claim, judge(task, loop.time() - t0, claim)), False

    def _start(self, claim: Claim) -> asyncio.Task:
        """The fetch, in a task of its own: shutdown may cancel it, and it may be handed off."""
        task = asyncio.create_task(
            self._fetch_as_batch(claim), name=f"fetch {claim.job_id}/{claim.idx}"
        )
        self._fetches.add(task)
        if self._cancelling:
            task.cancel()
        return task

    async def _wait_or_hand_off(self, claim: Claim, task: asyncio.Task, t0: float) -> bool:
        """Wait for the fetch; hand it off once it has run `hand_off_after` and there is room
        for one more handed-off target (docs/WORKER.md §Handing off slow targets)."""
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=self.cfg.hand_off_after or None)
                if not task.done() and self._may_hand_off(claim):
                    self._slow[who_of(claim)] = asyncio.create_task(
                        self._slow_lane(claim, task, t0),
                        name=f"handed off {claim.job_id}/{claim.idx}",
                    )
                    return True
        except BaseException:
            self._let_go(task)
            raise
        self._let_go(task)
        return False

    def _let_go(self, task: asyncio.Task) -> None:
        """The fetch is no longer waited for: shutdown stops counting it, and one still
        running (its waiter was cancelled) is cancelled."""
        self._fetches.discard(task)
        if not task.done():
            task.cancel()

    def _may_hand_off(self, claim: Claim) -> bool:
        return (
            not self._stopping
            and self.cfg.hand_off_after > 0
            and len(self._slow) < self.cfg.slow_targets
            and who_of(claim) not in self._slow
        )

    async def _slow_lane(self, claim: Claim, task: asyncio.Task, t0: float) -> None:
        """A handed-off target: wait for its fetch and store it, chaining no claim; then its
        job, and its caller's other jobs, may go again."""
        loop = asyncio.get_running_loop()
        try:
            try:
                await asyncio.wait({task})
            finally:
                self._let_go(task)
            await self._settle(claim, judge(task, loop.time() - t0, claim), chain=False)
        finally:
            self._slow.pop(who_of(claim), None)
            self.rotation.release(claim.job_id)
            self._poke()  # its slots are free and its caller's jobs are ready again

    async def _settle(self, claim: Claim, outcome: Outcome, *, chain: bool = True) -> Claim | None:
        """Store a fetched target (or put it back); with `chain`, the next target is claimed
        in the same transaction and returned."""
        now = self.clock()
        err = outcome.error
        host = host_of(claim.url)
        if isinstance(err, HostWait):  # the site's spacing: not busy, the busy clock waits
            self.room.wait(host, err.retry_after or now)
            self.room.remember(claim.job_id, claim.caller, host)
            await self._put_back(claim, now, claim.busy_since, now)
            return None
        if outcome.status == BUSY:
            busy_since = claim.busy_since if claim.busy_since is not None else now
            if now - busy_since <= self.cfg.retry_for:
                await self._busy(claim, err, host, busy_since, now)
                return None
            err.retry_after = now + self.cfg.retry_wait
            outcome = replace(outcome, status=str(TargetStatus.FAILED))
        elif err is not None and err.retry_after is not None and "upstream_status" in err.extra:
            self.room.wait(err.answered_by or host, err.retry_after)  # the host that said when
        self.usage.charge(who_of(claim), outcome.seconds, asyncio.get_running_loop().time())
        return await self._finish(claim, outcome, now, chain=chain)

    async def _fetch_as_batch(self, claim: Claim) -> dict:
        with batch_scope():  # the pipeline's log lines name no URL or host for batch work
            return await self.fetch(claim)

    async def _busy(
        self, claim: Claim, err: Busy, host: str, busy_since: float, now: float
    ) -> None:
        if isinstance(err, GatesFull):
            # A gate filled between the look and the fetch (a sibling task, another
            # process): skip the job until a slot frees, like a job skipped before its claim.
            self.room.remember(claim.job_id, claim.caller, host)
            await self._put_back(claim, now, busy_since, now)
            return
        # Not the gates (the database was busy): try again after `retry_wait`.
        retry_at = now + self.cfg.retry_wait
        self.rotation.wait(claim.job_id, retry_at)
        await self._put_back(claim, retry_at, busy_since, now)

    async def _put_back(
        self, claim: Claim, retry_at: float, busy_since: float | None, now: float
    ) -> None:
        """The target goes back to `pending`, ready at `retry_at`; its job waits for it (it
        stays serial) and the task serves other jobs. Only a busy answer starts or keeps the
        `busy_since` clock: waiting for room or for the site is not being busy."""
        await self._write(
            claim.job_id,
            "requeue",
            lambda: self.store.batch.requeue(
                claim.job_id, claim.idx, retry_at=retry_at, busy_since=busy_since, now=now
            ),
        )
        batch_event(
            log,
            "batch target put back, retry later",
            level=logging.DEBUG,
            job_id=claim.job_id,
            idx=claim.idx,
        )

    async def _finish(
        self, claim: Claim, outcome: Outcome, now: float, *, chain: bool
    ) -> Claim | None:
        """Store the target; with `chain`, the same transaction claims the next one in
        rotation order."""
        following: list[str] = []
        if chain and not self._stopping:
            await self._refresh_if_due()  # a job submitted meanwhile takes its turn
            following = [
                j
                for j in self.rotation.candidates(self._rank())
                if self._ready(j, now, mine=claim.job_id)
            ]
        err = outcome.error
        finished = await self._write(
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
                then_claim=following,
            ),
        )
        if finished is None:
            return None
        log_stored(claim, outcome, finished)
        return finished.next

    # -- store calls --------------------------------------------------------------------------

    async def _try(self, job_id: str | None, what: str, call: Awaitable[T]) -> T | None:
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

    async def _write(self, job_id: str, what: str, op: Callable[[], Awaitable[T]]) -> T | None:
        """A target's outcome: retried until stored, since a lost write strands the job.

        Backs off up to `WRITE_BACKOFF_MAX` between attempts. Once the worker is stopping it
        gives up after `WRITE_ATTEMPTS`: the next worker marks the job failed (`restart`).
        """
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
                if self._stopping and attempt >= WRITE_ATTEMPTS:
                    return None
                await asyncio.sleep(min(WRITE_BACKOFF_MAX, 0.2 * attempt))
