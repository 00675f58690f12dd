"""`/healthz` answers from heartbeats read in the background, never from the database, and
what it says stays true as that read ages (docs/OPERATIONS.md §Health)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from sift import config
from sift.api.app import create_app
from sift.api.appkeys import STORE, WORKER
from sift.api.worker_watch import REFRESH


@pytest.fixture
def cfg(state_dir):
    state_dir.mkdir(exist_ok=True)
    return config.from_dict({"store": {"state_dir": str(state_dir)}})


async def test_healthz_does_not_wait_behind_a_held_reader_thread(aiohttp_client, cfg):
    client = await aiohttp_client(create_app(cfg))
    store = client.app[STORE]
    await store.worker.beat(pid=7, started_at=time.time(), now=time.time())
    await client.app[WORKER].refresh()
    release = threading.Event()
    held = asyncio.ensure_future(store._db.on_reader(lambda c: release.wait(5)))
    try:
        await asyncio.sleep(0.05)  # the reader thread is now busy with a slow status read
        t0 = time.monotonic()
        resp = await asyncio.wait_for(client.get("/healthz"), timeout=2)
        took = time.monotonic() - t0
        body = await resp.json()
    finally:
        release.set()
        await held
    assert resp.status == 200
    assert took < 1.0
    assert body["worker"]["alive"] is True and body["worker"]["pid"] == 7
    assert body["workers"] == {"live": 1}


async def test_healthz_sees_a_new_heartbeat_within_its_refresh_period(aiohttp_client, cfg):
    client = await aiohttp_client(create_app(cfg))
    assert (await (await client.get("/healthz")).json())["worker"] == {"alive": False}
    await client.app[STORE].worker.beat(pid=9, started_at=time.time(), now=time.time())
    t0 = time.monotonic()
    while True:
        body = await (await client.get("/healthz")).json()
        if body["worker"]["alive"]:
            break
        assert time.monotonic() - t0 < REFRESH + 1.0, "the background read never came"
        await asyncio.sleep(0.05)
    assert body["worker"]["pid"] == 9
    assert 0 <= body["checked_age"] <= REFRESH + 1.0


async def test_healthz_never_says_alive_from_a_read_older_than_the_dead_after(aiohttp_client, cfg):
    now = [1000.0]
    client = await aiohttp_client(create_app(cfg, clock=lambda: now[0]))
    await client.app[STORE].worker.beat(pid=5, started_at=999.0, now=999.5)
    await client.app[WORKER].refresh()
    assert (await (await client.get("/healthz")).json())["worker"]["alive"] is True
    now[0] = 999.5 + client.app[STORE].worker.dead_after  # no read since: the kept beat ages
    body = await (await client.get("/healthz")).json()
    assert body["worker"]["alive"] is False and body["workers"] == {"live": 0}
    assert body["checked_age"] == pytest.approx(now[0] - 1000.0)
