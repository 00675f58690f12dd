"""Whether a worker is alive, as submit replies and status bodies report it (`"worker"`).

While a worker is up, the heartbeat row is read at most once a second per API process, so a
busy status poller costs no extra database read; the worker beats every 2 s and is called dead
after `[store] worker_dead_after` (15 s), so a one-second-old "up" is as good as a fresh one. A
"down" is never reused: the first read after a worker starts says so.
"""

from __future__ import annotations

from collections.abc import Callable

from sift.store import Store

REFRESH = 1.0  # seconds an answer is reused


class WorkerWatch:
    def __init__(self, store: Store, clock: Callable[[], float]):
        self.store = store
        self.clock = clock
        self._checked = float("-inf")
        self._up = False

    async def up(self) -> bool:
        now = self.clock()
        if not (self._up and 0 <= now - self._checked < REFRESH):
            beat = await self.store.worker.get(now)
            self._up = beat is not None and now - beat.heartbeat < self.store.worker.dead_after
            self._checked = now
        return self._up
