"""Long-poll and event-stream wake-ups (docs/ARCHITECTURE.md §Wake-ups).

Held requests must cost the database (and so the worker) almost nothing, however many there
are. A held request holds no gate, no transaction and no worker resource: only an
`asyncio.Event`. How it is woken depends on what the store offers:

* pushed (PostgreSQL): the store hands over the job id of every job that ended and of every
  event logged, as they commit. A long-poll wakes when its own job ended, a stream when its own
  job logged something; nothing else is read, and one job's events never make the long-polls
  of other jobs re-read their statuses.
* watched (SQLite): one watcher task per API process checks the store's `data_version` (a
  cheap read that changes when any other connection commits) every `tick`, and only then reads
  the statuses of the long-polled jobs and the last event id of every streamed job, each in one
  query, waking what changed.

A stream follows its job for its whole life (`follow`): it clears its flag before each read, so
a change that commits during the read still wakes its next wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict

from sift.store import Store

log = logging.getLogger("sift.api")

TICK = 0.02  # seconds between data_version checks while someone waits (a tiny read)
ENDED_KEPT = 4096  # recently ended job ids kept, for a long-poll that starts just after its end
ANY = ""  # a pushed job id meaning "any job may have changed" (the store's listener reconnected)


class Follow:
    """One stream's interest in its job's log: the last event id it has, and a flag set when
    the log may have grown past it (or the job is gone)."""

    __slots__ = ("after", "changed", "job_id")

    def __init__(self, job_id: str, after: int):
        self.job_id, self.after = job_id, after
        self.changed = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        """Return when the log may have changed since the flag was cleared, or after
        `timeout` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout)


class JobWaiter:
    def __init__(self, store: Store, *, tick: float = TICK):
        self.store = store
        self.tick = tick
        self._waiting: dict[str, asyncio.Event] = {}
        self._counts: dict[str, int] = {}
        self._follows: dict[str, set[Follow]] = {}
        self._task: asyncio.Task | None = None
        self._kick = asyncio.Event()
        self._pushed: bool | None = None  # None: not asked yet
        self._asking: asyncio.Lock | None = None
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._recheck: asyncio.Future | None = None

    async def wait(self, job_id: str, timeout: float) -> None:
        """Return when the job may have become terminal, or after `timeout` seconds."""
        event = self._waiting.setdefault(job_id, asyncio.Event())
        self._counts[job_id] = self._counts.get(job_id, 0) + 1
        try:
            if await self._start() and job_id in self._ended:
                return  # it ended between the caller's read and now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            self._counts[job_id] -= 1
            if self._counts[job_id] == 0:
                del self._counts[job_id]
                self._waiting.pop(job_id, None)

    @contextlib.asynccontextmanager
    async def follow(self, job_id: str, after: int):
        """A stream's `Follow` of `job_id`, from event id `after`, while the block runs."""
        follow = Follow(job_id, after)
        self._follows.setdefault(job_id, set()).add(follow)
        try:
            await self._start()
            yield follow
        finally:
            follows = self._follows.get(job_id)
            if follows is not None:
                follows.discard(follow)
                if not follows:
                    del self._follows[job_id]

    async def _start(self) -> bool:
        """Subscribe to the store's pushes once; without them, make sure the watcher runs.
        True when pushed."""
        if self._pushed is None:
            if self._asking is None:
                self._asking = asyncio.Lock()
            async with self._asking:
                if self._pushed is None:
                    ends = await self.store.subscribe("ends", self._on_end)
                    events = ends and await self.store.subscribe("events", self._on_events)
                    self._pushed = bool(ends and events)
        if not self._pushed:
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._watch(), name="sift-job-waiter")
            self._kick.set()
        return self._pushed

    # -- pushed ------------------------------------------------------------------------------

    def _on_end(self, job_id: str) -> None:
        if job_id == ANY:
            self._recheck_all()
            return
        self._ended[job_id] = None
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)
        event = self._waiting.get(job_id)
        if event is not None:
            event.set()

    def _on_events(self, job_id: str) -> None:
        if job_id == ANY:
            self._recheck_all()
            return
        for follow in self._follows.get(job_id, ()):
            follow.changed.set()

    def _recheck_all(self) -> None:
        """Anything may have changed (the listener was not listening for a while): every
        stream re-reads, and the long-polls whose job is terminal wake (a long-poll answers
        once it wakes, so it must not wake for nothing)."""
        for follows in self._follows.values():
            for follow in follows:
                follow.changed.set()
        if self._waiting and (self._recheck is None or self._recheck.done()):
            self._recheck = asyncio.ensure_future(self._recheck_terminal())

    async def _recheck_terminal(self) -> None:
        try:
            await self._wake_terminal()
        except Exception as e:
            log.warning("job waiter: %s", type(e).__name__)

    # -- watched -----------------------------------------------------------------------------

    async def _watch(self) -> None:
        version = None
        while True:
            if not self._waiting and not self._follows:
                self._kick.clear()
                await self._kick.wait()
                version = None
            try:
                now_version = await self.store.data_version()
                if now_version != version:
                    version = now_version
                    await self._wake_terminal()
                    await self._wake_logs()
            except Exception as e:
                log.warning("job waiter: %s", type(e).__name__)
            await asyncio.sleep(self.tick)

    async def _wake_terminal(self) -> None:
        ids = list(self._waiting)
        if not ids:
            return
        done = await self.store.batch.terminal_among(ids)
        for job_id in done:
            event = self._waiting.get(job_id)
            if event is not None:
                event.set()

    async def _wake_logs(self) -> None:
        ids = list(self._follows)
        if not ids:
            return
        lasts = await self.store.events.last_ids(ids)
        for job_id in ids:
            last = lasts.get(job_id, -1)  # -1: the job is gone
            for follow in self._follows.get(job_id, ()):
                if last < 0 or last > follow.after:
                    follow.changed.set()

    async def close(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
