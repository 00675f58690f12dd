"""The heartbeat row, so the API's /healthz can say whether a worker is alive."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sift.constants import HEARTBEAT_EVERY
from sift.store import STORE_ERRORS, Store

log = logging.getLogger("sift.worker")


async def beat_forever(
    store: Store,
    *,
    pid: int,
    started_at: float,
    clock: Callable[[], float],
    every: float = HEARTBEAT_EVERY,
) -> None:
    """Write the heartbeat now and every `every` seconds; a store error skips one beat.

    Each beat also checkpoints the WAL, on a thread and connection of its own, so the commits
    on the batch path seldom have to and no read or write waits for it.
    """
    while True:
        try:
            await store.worker.beat(pid, started_at, clock())
            await store.checkpoint()
        except STORE_ERRORS as e:
            log.warning("worker: heartbeat not written (%s)", type(e).__name__)
        await asyncio.sleep(every)
