"""The notification listener hears only the channels its process has callbacks for
(sift/store/pg/notify.py): a worker is not woken by `sift_events` at every stored target."""

from __future__ import annotations

import asyncio

import psycopg

from sift.store.pg.notify import EVENTS, WORK, Listener


async def _until(check, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)


async def test_a_listener_hears_only_the_channels_it_has_callbacks_for(pg_dsn):
    listener = Listener(pg_dsn)
    work: list[str] = []
    events: list[str] = []
    listener.on(WORK, work.append)
    await listener.start()
    try:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as c:
            started = listener.version
            await c.execute("select pg_notify(%s, 'e1')", (EVENTS,))
            await c.execute("select pg_notify(%s, 'w1')", (WORK,))
            await _until(lambda: "w1" in work)
            assert listener.version == started + 1  # sift_events was not heard
            listener.on(EVENTS, events.append)  # a new channel: heard from now on
            await listener.start()
            await c.execute("select pg_notify(%s, 'e2')", (EVENTS,))
            await _until(lambda: "e2" in events)
            assert "e1" not in events
    finally:
        await listener.close()
