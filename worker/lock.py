"""The singleton lock: one active worker per database, a second one waits as a hot standby.

`state_dir/worker.lock` is an advisory file lock (`filelock`), so the kernel frees it the moment
its holder dies, however it dies; the standby polls for it and takes over.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import filelock

from worker.sleeping import wait_or_timeout

LOCK_NAME = "worker.lock"
STANDBY_POLL = 0.25  # seconds between a standby's attempts at the lock

log = logging.getLogger("sift.worker")


class SingletonLock:
    def __init__(self, state_dir: Path, *, poll: float = STANDBY_POLL):
        self.path = Path(state_dir) / LOCK_NAME
        self.poll = poll
        self._lock = filelock.FileLock(self.path, mode=0o600, thread_local=False)

    def try_acquire(self) -> bool:
        try:
            self._lock.acquire(blocking=False)
        except filelock.Timeout:
            return False
        return True

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Hold the lock, standing by while another worker does; False if stopped first."""
        if self.try_acquire():
            return True
        log.info("worker: another worker holds %s; standing by", self.path.name)
        while not stop.is_set():
            await wait_or_timeout(stop, self.poll)
            if not stop.is_set() and self.try_acquire():
                log.info("worker: the active worker is gone; taking over")
                return True
        return False

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release(force=True)
