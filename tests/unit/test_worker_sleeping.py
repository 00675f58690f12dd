"""A sleeping loop's cancel is never lost, even when its event is set in the same turn
(docs/WORKER.md §Shutdown and supervision)."""

from __future__ import annotations

import asyncio

from worker.sleeping import wait_or_timeout


async def test_a_cancel_in_the_turn_the_event_is_set_still_cancels_the_sleeper():
    event = asyncio.Event()

    async def loop():
        while True:
            event.clear()
            await wait_or_timeout(event, 10)

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # the task sleeps on the event
    event.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert task in done and task.cancelled()


async def test_the_sleep_ends_at_its_timeout_without_an_error():
    loop = asyncio.get_running_loop()
    started = loop.time()
    await wait_or_timeout(asyncio.Event(), 0.05)
    assert loop.time() - started >= 0.04
