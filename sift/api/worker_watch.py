"""Whether a worker is alive, as submit replies, status bodies and `/healthz` report it.

While a worker is up, the heartbeat row is read at most once a second per API process, so a
busy status poller costs no extra database read; the worker beats every 2 s and is called dead
after `[store] worker_dead_after` (15 s), so a one-second-old "up" is as good as a fresh one. A
"down" is never reused by `up()`: the first read after a worker starts says so.

`/healthz` reads no database at all (docs/OPERATIONS.md §Health): a background task reads the
heartbeats every `REFRESH` seconds and the handler answers from the last read, so a probe never
waits behind status reads on the reader thread. What it reports stays true as the read ages:
the age and `alive` are computed from the kept heartbeat and the current time, and a kept
heartbeat is never newer than the real one, so a stale read can only make `alive` false early,
never true late; `checked_age` says how old the read is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sift.store import Store
from sift.store.errors import StoreBusy, StoreError
from sift.store.records import Heartbeat

REFRESH = 1.0  # seconds an answer is reused; the background read's period
log = logging.getLogger("sift.api")


class WorkerWatch:
    def __init__(self, store: Store, clock: Callable[[], float]):
        self.store = store
        self.clock = clock
        self._checked = float("-inf")
        self._up = False
        self._beat: Heartbeat | None = None
        self._live = 0
        self._read_at: float | None = None

    async def up(self) -> bool:
        now = self.clock()
        if not (self._up and 0 <= now - self._checked < REFRESH):
            beat = await self.store.worker.get(now)
            self._up = beat is not None and now - beat.heartbeat < self.store.worker.dead_after
            self._checked = now
        return self._up

    async def refresh(self) -> None:
        """Read the newest heartbeat and the live count once, for `health`."""
        now = self.clock()
        beat = await self.store.worker.get(now)
        live = await self.store.worker.live(now)
        self._beat, self._live, self._read_at = beat, live, now

    async def keep_fresh(self, period: float = REFRESH) -> None:
        """Refresh every `period` seconds until cancelled; a failed read keeps the last one,
        whose `checked_age` then grows."""
        while True:
            await asyncio.sleep(period)
            try:
                await self.refresh()
            except (StoreError, StoreBusy) as e:
                log.warning("healthz: heartbeat read failed: %s", e)
            except Exception:  # the loop must outlive any one read; checked_age shows it
                log.exception("healthz: heartbeat read failed")

    def health(self, now: float) -> dict[str, Any]:
        """The `/healthz` body from the last read, aged to `now`."""
        worker: dict[str, Any] = {"alive": False}
        beat = self._beat
        if beat is not None:
            age = max(0.0, now - beat.heartbeat)
            alive = age < self.store.worker.dead_after
            worker = {"alive": alive, "pid": beat.pid, "heartbeat_age": round(age, 3)}
        live = self._live if worker["alive"] else 0
        checked = None if self._read_at is None else round(max(0.0, now - self._read_at), 3)
        return {"ok": True, "worker": worker, "workers": {"live": live}, "checked_age": checked}
