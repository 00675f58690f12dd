"""Sleep until an event is set or a time passes, and never swallow a cancel.

`asyncio.wait_for(event.wait(), t)` on Python 3.11 returns normally when the event is set in
the same loop turn as the task is cancelled: the cancel is lost, and a loop that sleeps this
way runs on after shutdown cancelled it (the worker's wind-down then waits for it forever).
`asyncio.timeout` keeps the cancel (docs/WORKER.md §Shutdown and supervision).
"""

from __future__ import annotations

import asyncio
import contextlib


async def wait_or_timeout(event: asyncio.Event, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
