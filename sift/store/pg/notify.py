"""Wake-ups across boxes: LISTEN/NOTIFY on two channels.

* `sift_work`: a job was submitted or cancelled; every worker on every box re-reads its
  rotation (the PostgreSQL counterpart of the Unix-datagram nudge, which reaches one box only).
* `sift_jobs`: a job became terminal (finished, failed or cancelled); every API box's long-poll
  waiter re-reads the statuses it waits for.
* `sift_events`: a job's event log grew (docs/API.md §Events); every API box wakes that job's
  event streams, and no other waiter.
* `sift_hooks`: a webhook delivery was queued or queued again; every worker's sender takes it
  at once instead of on its next poll (docs/WORKER.md §Webhook sender).

The payload is the job id, so a waiter wakes only what concerns that job: one job's events do
not make every long-poll re-read its status (docs/ARCHITECTURE.md §Wake-ups).

`pg_notify` runs inside the transaction that made the change, so the notification is delivered
exactly when that change commits, never before and never for a rolled-back one. `Listener`
holds one connection per process, listening only on the channels this process has callbacks
for (a worker does not hear `sift_events`, sent at every stored target: each notification
heard wakes a server process and this one); each notification bumps `version` and calls the
callbacks of its channel. A callback on a channel not heard yet reconnects, listening on it
too. After the connection was lost (and once it is listening again) every callback of
every channel is called with the payload `ANY`: anything may have changed meanwhile, so
waiters re-read rather than sleep through a change; workers still poll on
`batch.poll_interval` either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import psycopg

from sift.store.pg.db import Conn

log = logging.getLogger("sift.store")

WORK = "sift_work"
JOBS = "sift_jobs"
EVENTS = "sift_events"
HOOKS = "sift_hooks"
ANY = ""  # the payload of a reconnect's wake-up: any job may have changed
RETRY_MIN, RETRY_MAX = 0.1, 5.0


async def notify(conn: Conn, channel: str, payload: str = "") -> None:
    await conn.execute("select pg_notify(%s, %s)", (channel, payload))


class Listener:
    def __init__(self, dsn: str):
        self.dsn = dsn
        self.version = 0
        self._callbacks: dict[str, list[Callable[[str], None]]] = {
            c: [] for c in (WORK, JOBS, EVENTS, HOOKS)
        }
        self._task: asyncio.Task | None = None
        self._listening: set[str] | None = None  # the channels the connection listens on
        self._ready = asyncio.Event()

    def on(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call `callback(payload)` for every notification on `channel` (on the event loop);
        `start()` after it listens on the channel."""
        self._callbacks[channel].append(callback)
        listening = self._listening
        if self._task is not None and listening is not None and channel not in listening:
            self._task.cancel()  # its connection closes; `start()` reconnects
            self._task, self._listening = None, None
            self._ready = asyncio.Event()

    @property
    def _heard(self) -> list[str]:
        return [c for c, callbacks in self._callbacks.items() if callbacks]

    async def start(self) -> None:
        """Start listening; returns once LISTEN is in place (or the first attempt failed)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="sift-pg-listener")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), 10)

    async def _run(self) -> None:
        wait = RETRY_MIN
        while True:
            self._listening = set(self._heard)
            try:
                conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                async with conn:
                    for channel in self._listening:
                        await conn.execute(f"listen {channel}")
                    self._ready.set()
                    self._bump()  # anything missed while not listening counts as a change
                    wait = RETRY_MIN
                    async for note in conn.notifies():
                        self._deliver(note.channel, note.payload)
            except psycopg.Error as e:
                log.warning("store: notification listener lost (%s); retrying", type(e).__name__)
            self._ready.set()
            self._bump()
            await asyncio.sleep(wait)
            wait = min(RETRY_MAX, wait * 2)

    def _bump(self) -> None:
        self.version += 1
        for channel in self._callbacks:
            self._call(channel, ANY)

    def _deliver(self, channel: str, payload: str) -> None:
        self.version += 1
        self._call(channel, payload)

    def _call(self, channel: str, payload: str) -> None:
        for callback in self._callbacks.get(channel, ()):
            try:
                callback(payload)
            except Exception:
                log.exception("store: notification callback failed")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
