"""Long-poll support for `GET /v1/batch/{id}?wait=S`.

Held requests must cost the database (and so the worker) almost nothing, however many there
are. One watcher task per API process checks the store's `data_version` (a cheap read that
changes when any other connection commits) and only then reads the statuses of the watched
jobs, waking the requests whose job has become terminal. A held request holds no gate, no
transaction and no worker resource: only an `asyncio.Event`.

Event streams (`GET /v1/batch/{id}/events`) wait on the same watcher: on each change it also
reads the last event id of every streamed job, in one query, and wakes the streams whose job
logged something new (or went away).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sift.store import Store

log = logging.getLogger("sift.api")

TICK = 0.02  # seconds between data_version checks while someone waits (a tiny read)


class JobWaiter:
    def __init__(self, store: Store, *, tick: float = TICK):
        self.store = store
        self.tick = tick
        self._waiting: dict[str, asyncio.Event] = {}
        self._counts: dict[str, int] = {}
        self._task: asyncio.Task | None = None
        self._kick = asyncio.Event()
        self._logs: dict[str, _Log] = {}
        self._recheck = False

    async def wait(self, job_id: str, timeout: float) -> None:
        """Return when the job may have become terminal, or after `timeout` seconds."""
        event = self._waiting.setdefault(job_id, asyncio.Event())
        self._counts[job_id] = self._counts.get(job_id, 0) + 1
        self._ensure_task()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            self._counts[job_id] -= 1
            if self._counts[job_id] == 0:
                del self._counts[job_id]
                self._waiting.pop(job_id, None)

    async def wait_events(self, job_id: str, after: int, timeout: float) -> None:
        """Return when the job may have an event after id `after` (or is gone), or after
        `timeout` seconds."""
        log = self._logs.get(job_id)
        if log is None:
            log = self._logs[job_id] = _Log()
            self._recheck = True  # a change may have landed since the stream's last read
        log.afters.append(after)
        self._ensure_task()
        try:
            if log.last is not None and log.last > after:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(log.event.wait(), timeout)
        finally:
            log.afters.remove(after)
            if not log.afters:
                del self._logs[job_id]

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="sift-job-waiter")
        self._kick.set()

    async def _watch(self) -> None:
        version = None
        while True:
            if not self._waiting and not self._logs:
                self._kick.clear()
                await self._kick.wait()
                version = None
            try:
                now_version = await self.store.data_version()
                if now_version != version or self._recheck:
                    version, self._recheck = now_version, False
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
        ids = list(self._logs)
        if not ids:
            return
        lasts = await self.store.events.last_ids(ids)
        for job_id in ids:
            log = self._logs.get(job_id)
            last = lasts.get(job_id, -1)  # -1: the job is gone
            if log is None:
                continue
            log.last = last
            if last < 0 or any(last > after for after in log.afters):
                log.event.set()
                log.event = asyncio.Event()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class _Log:
    """The streams of one job: the id each waits after, the last event id seen, and the event
    they wait on (replaced after each wake-up, so a stream that waits again waits for the
    next change)."""

    __slots__ = ("afters", "event", "last")

    def __init__(self):
        self.afters: list[int] = []
        self.last: int | None = None
        self.event = asyncio.Event()
