"""The drain (docs/WORKER.md §Rotation and drain, §The scheduler): the worker's tasks, each a
loop around `worker.scheduler.decide` — claim, fetch, store, wake.

A task asks the scheduler which job's next target starts now, claims it (the store's rules
keep a job serial, across tasks and workers), fetches it in a child task and stores the outcome;
the store of one target also claims the next in the same transaction (`finish(...,
then_claim=…)`). A target is handed off to the slow lane (it finishes and is stored on its own
and the task goes on) at once when another caller's ready job would wait for the task, or once
it has run `hand_off_after`; the waiting task is woken by whatever can make a job ready. When
the scheduler has nothing ready a task waits for whichever comes first: a nudge, a slot freed,
the end of the earliest wait, the poll timer, or stop. Each fetch runs in its own task so that
shutdown can let it finish within the grace period and then cancel it, and its outcome is still
stored.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from sift.config import BatchConfig
from sift.gates import Gates, Permit
from sift.log import batch_event
from sift.store import Claim, Store
from worker.fairness import Who
from worker.fetches import Fetches, FetchFn, Key
from worker.hosts import host_of
from worker.outcome import Outcome, judge, key_of, log, who_of
from worker.scheduler import decide
from worker.settle import settle
from worker.sleeping import wait_or_timeout
from worker.state import DrainState
from worker.writes import Writes

SWEEP_EVERY = 60.0  # seconds between the worker's sweeps of expired jobs


class Runner:
    """`cfg.drain_tasks` drain tasks over one scheduler state; `run()` until `shutdown()`."""

    def __init__(
        self,
        store: Store,
        cfg: BatchConfig,
        fetch: FetchFn,
        *,
        clock: Callable[[], float] = time.time,
        gates: Gates | None = None,
    ):
        """`gates`: the limits the fetches acquire; a target's slots are taken when it is
        admitted and handed to its fetch, and a job whose next target finds no room is skipped;
        None for fetches that take no gates (tests)."""
        self.store = store
        self.cfg = cfg
        self.fetch = fetch
        self.clock = clock
        self.writes = Writes(store, cfg, lambda: self._stopping)
        self.state = DrainState(gates, shared=store.engine == "postgres")
        self.fetches = Fetches(fetch, cfg)
        self._sleepers: set[asyncio.Event] = set()  # one per idle drain task
        self._holders: set[asyncio.Event] = set()  # one per drain task waiting on its target
        self._dirty = True  # re-read the live jobs (a nudge, the start)
        self._gen = 0  # bumped when a refresh brings new jobs
        self._stopping = False  # stop taking targets
        self._refreshed_at = -math.inf
        self._swept_at = -math.inf
        self._permits: dict[Key, Permit] = {}  # admitted targets' gate slots, until they start

    # -- control ------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping

    def nudge(self) -> None:
        """The listener's callback: a job was submitted or cancelled."""
        self._dirty = True
        self._poke()

    def slot_freed(self) -> None:
        """A gate slot was given back (here, or in the API process): a skipped job may go."""
        if self.state.room.any_gated:
            self._poke()

    def stop(self) -> None:
        """Stop taking targets; fetches in flight go on (see `shutdown`)."""
        self._stopping = True
        self._poke()

    async def shutdown(self, grace: float) -> None:
        """Stop taking targets, let fetches in flight finish within `grace`, then cancel them;
        the drain tasks store the outcomes and return (await `run()` for that)."""
        self.stop()
        await self.fetches.grace(grace)

    async def run(self) -> None:
        """Run the drain tasks until they have all stopped; a crashed task ends the rest."""
        async with asyncio.TaskGroup() as tg:
            for i in range(self.cfg.drain_tasks):
                tg.create_task(self._drain(), name=f"drain-{i}")
        await asyncio.gather(*self.fetches.handed.values(), return_exceptions=True)

    # -- the loop -----------------------------------------------------------------------------

    async def _drain(self) -> None:
        claim: Claim | None = None
        # A target claimed together with the previous one's finish runs even when a stop came
        # during that write (shutdown lets it finish within the grace period).
        while claim is not None or not self._stopping:
            if claim is None:
                await self.refresh_if_due()
                gen = self._gen
                claim, wake_at = await self._take()
                if claim is None:
                    await self._idle(gen, wake_at)
                    continue
            following = await self._one(claim)
            if following is None or host_of(following.url) != host_of(claim.url):
                self.slot_freed()  # its slots are free and this task does not take them again
            claim = following

    async def _take(self) -> tuple[Claim | None, float | None]:
        """Claim the scheduler's pick; a job the store refuses (in flight on another worker,
        nothing ready) or whose host has no room is passed over in this scan."""
        tried: set[str] = set()
        while not self._stopping:
            decision = decide(self.state.snapshot(self.clock(), tried))
            job_id = decision.job_id
            if job_id is None:
                return None, decision.wake_at
            tried.add(job_id)
            self.state.mark(job_id, in_flight=True)  # a sibling passes it over during the claim
            claim = await self.writes.attempt(
                job_id, "claim", self.store.batch.claim(job_id, self.clock())
            )
            if claim is None:
                self.state.release(job_id)
            elif await self._admit(claim):
                return claim, None
        return None, None

    async def _admit(self, claim: Claim) -> bool:
        """Keep a claimed target whose host has room, and start its clock and charge; else
        put it back as it was (its job keeps its place) and remember its host."""
        host, now = host_of(claim.url), self.clock()
        refused, permit = self.state.room.take(claim.caller, host, now)
        if refused is not None:
            self.state.room.remember(claim.job_id, claim.caller, host)
            await self.writes.put_back(claim, now, claim.busy_since, now)
            self.state.done(key_of(claim))
            return False
        if permit is not None:
            self._permits[key_of(claim)] = permit
        self.state.started(key_of(claim), who_of(claim), now, host)
        return True

    async def refresh_if_due(self) -> None:
        """Re-read the live jobs after a nudge, or when the poll interval has passed."""
        now = self.clock()
        if not self._dirty and now < self._refreshed_at + self.cfg.poll_interval:
            return
        self._dirty = False
        self._refreshed_at = now
        if now >= self._swept_at + SWEEP_EVERY:
            self._swept_at = now
            swept = await self.writes.attempt(
                None, "sweep", self.store.batch.sweep(now, self.cfg.ttl)
            )
            if swept:
                batch_event(log, "batch expired jobs swept", count=swept)
        owned = await self.writes.attempt(None, "live jobs", self.store.batch.live_owners())
        if owned is None:
            return
        added = self.state.adopt(owned, self.clock())
        if added:
            self._gen += 1
            self._poke()  # an idle sibling task may take the new job

    async def _idle(self, gen: int, wake_at: float | None) -> None:
        """Wait for a nudge, a slot freed, the earliest wait's end, the poll timer, or stop."""
        if self._stopping or self._dirty or self._gen != gen:
            return  # something changed since the scan: scan again
        timeout = self.cfg.poll_interval
        if wake_at is not None:
            timeout = min(timeout, max(0.0, wake_at - self.clock()))
        woken = asyncio.Event()
        self._sleepers.add(woken)
        try:
            await wait_or_timeout(woken, timeout)
        finally:
            self._sleepers.discard(woken)

    def _poke(self) -> None:
        for woken in self._sleepers | self._holders:
            woken.set()

    def _poke_holders(self) -> None:
        """A sibling task took or left a target: whether a ready job waits for a task changed."""
        for woken in self._holders:
            woken.set()

    # -- one target ---------------------------------------------------------------------------

    async def _one(self, claim: Claim) -> Claim | None:
        """Fetch and store one target; the next target when one was claimed with it. A target
        handed off stores itself (None here)."""
        task = self.fetches.start(claim, self._permits.pop(key_of(claim), None))
        self._poke_holders()
        if await self._wait_or_hand_off(claim, task):
            return None
        following = await settle(self, claim, self._judged(claim, task), chain=True)
        self._poke_holders()  # its job may be ready again, or this task free
        if following is not None and not await self._admit(following):
            return None
        return following

    def _judged(self, claim: Claim, task: asyncio.Task) -> Outcome:
        return judge(task, self.clock() - self.state.since(key_of(claim)), claim)

    async def _wait_or_hand_off(self, claim: Claim, task: asyncio.Task) -> bool:
        """Wait for the fetch; hand it off to the slow lane (docs/WORKER.md §Handing off slow
        targets) at once when another caller's ready job would wait for this task, or once it
        has run `hand_off_after`, either only while the lane has a place. Whatever can make a
        job ready (a store, a nudge, a slot freed, a sibling's start or end) sets `changed`;
        the end of the earliest timed wait is a timeout."""
        handed = False
        due = self.state.since(key_of(claim)) + self.cfg.hand_off_after
        changed = asyncio.Event()
        self._holders.add(changed)
        try:
            while not task.done():
                changed.clear()
                if not self._stopping and await self._to_lane(claim, due):
                    self.fetches.handed[key_of(claim)] = asyncio.create_task(
                        self._slow_lane(claim, task), name=f"handed off {claim.job_id}"
                    )
                    self.state.handed_off(key_of(claim))
                    handed = True
                    break
                await self._wait_for(task, changed, self._next_look(due, who_of(claim)))
        finally:
            self._holders.discard(changed)
            if not handed:
                self.fetches.let_go(task)
        return handed

    def _next_look(self, due: float, who: Who) -> float | None:
        """Seconds until the target is due for the lane, or until the earliest timed wait
        ends (another caller's job may be ready then); past due with no place, look again
        every `hand_off_after`."""
        if self.cfg.hand_off_after <= 0:
            return None
        now = self.clock()
        timeout = due - now if now < due else self.cfg.hand_off_after
        wake_at = self.state.wake_at(now) if self.state.others_live(who) else None
        if wake_at is not None:
            timeout = min(timeout, max(0.0, wake_at - now))
        return timeout

    @staticmethod
    async def _wait_for(task: asyncio.Task, changed: asyncio.Event, timeout: float | None) -> None:
        waiter = asyncio.ensure_future(changed.wait())
        try:
            await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()

    async def _to_lane(self, claim: Claim, due: float) -> bool:
        """The slow lane's rules (worker.state.DrainState.must_yield, .lane_has_room) on live
        jobs at most `poll_interval` old: whether another caller waits is judged on them."""
        if self.cfg.hand_off_after <= 0:
            return False
        await self.refresh_if_due()
        now, who, lanes = self.clock(), who_of(claim), self.cfg.slow_targets
        if now >= due:
            return self.state.lane_has_room(who, now, lanes)
        return self.state.must_yield(who, now, lanes, self.cfg.drain_tasks)

    async def _slow_lane(self, claim: Claim, task: asyncio.Task) -> None:
        """A handed-off target: wait for its fetch and store it, chaining no claim."""
        try:
            try:
                await asyncio.wait({task})
            finally:
                self.fetches.let_go(task)
            await settle(self, claim, self._judged(claim, task), chain=False)
        finally:
            self.fetches.handed.pop(key_of(claim), None)
            self.state.done(key_of(claim))
            self._poke()  # its slots are free and its job is ready again
