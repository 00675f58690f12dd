"""The per-key request rate in the API (docs/GATES.md §Request rate per key): a real app over a
real database file, a real site over loopback, the app's clock injected."""

from __future__ import annotations

import time

import apsw
import pytest

from sift import config
from sift.api.app import create_app
from sift.auth import add_key
from sift.timefmt import rfc3339
from tests.clock import Clock
from tests.site import HITS, FakeResolver, make_site

T0 = 1_800_000_000.0


@pytest.fixture
async def env(aiohttp_server, aiohttp_client, state_dir):
    site = await aiohttp_server(make_site())
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir), "busy_timeout": 2},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
            "gates": {"requests_per_second": 1, "request_burst": 2},
        }
    )
    keys = {name: add_key(cfg.keys_file, name) for name in ("alice", "bob")}
    clock = Clock(T0)
    client = await aiohttp_client(create_app(cfg, clock=clock, resolver=FakeResolver({})))
    return client, clock, keys, site, state_dir / "sift.db"


def auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


async def spend(client, key: str, n: int = 2) -> None:
    for _ in range(n):
        resp = await client.get("/v1/batch", headers=auth(key))
        assert resp.status == 200, await resp.text()


async def test_a_key_past_its_rate_is_answered_429_with_retry_after_from_its_bucket(env):
    client, clock, keys, _, _ = env
    await spend(client, keys["alice"])
    clock.now += 0.25  # a quarter token back: 0.75 s to the next one, Retry-After 1
    resp = await client.get("/v1/batch", headers=auth(keys["alice"]))
    assert resp.status == 429
    assert resp.headers["Retry-After"] == "1"
    body = await resp.json()
    assert body["hint"] == "retry" and body["retryable"] is True
    assert body["retry_after"] == rfc3339(clock.now + 1)
    assert "request rate" in body["error"]
    clock.now += 1  # waiting as told is admitted
    assert (await client.get("/v1/batch", headers=auth(keys["alice"]))).status == 200


async def test_the_rate_refuses_before_the_body_is_read_or_the_database_touched(env):
    client, _, keys, site, db_path = env
    await spend(client, keys["alice"])
    # A body that would be a 400: the refusal comes first.
    resp = await client.post("/v1/batch", data=b"{not json", headers=auth(keys["alice"]))
    assert resp.status == 429
    # A fetch the site would see: it never does.
    url = f"http://127.0.0.1:{site.port}/article/1"
    resp = await client.post("/v1/fetch", json={"url": url}, headers=auth(keys["alice"]))
    assert resp.status == 429
    assert not site.app[HITS]
    # With the database's write lock held elsewhere a submit would wait `busy_timeout` (2 s)
    # and answer 503; the refused one answers at once and writes nothing.
    conn = apsw.Connection(str(db_path))
    conn.execute("begin immediate")
    try:
        started = time.monotonic()
        resp = await client.post(
            "/v1/batch", json={"targets": [{"url": url}]}, headers=auth(keys["alice"])
        )
        assert resp.status == 429 and time.monotonic() - started < 1.0
    finally:
        conn.execute("rollback")
    assert conn.execute("select count(*) from batch_job").fetchone()[0] == 0


async def test_another_key_and_the_keyless_routes_are_not_limited(env):
    client, _, keys, _, _ = env
    await spend(client, keys["alice"])
    assert (await client.get("/v1/batch", headers=auth(keys["alice"]))).status == 429
    await spend(client, keys["bob"])
    for _ in range(5):
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/v1/openapi.json")).status == 200
    resp = await client.get("/v1/batch", headers=auth("sk-sift-nope"))
    assert resp.status == 401  # an unknown key is refused by the lookup, not counted


async def test_a_refusal_is_counted_by_its_outcome(env):
    client, _, keys, _, _ = env
    text = await (await client.get("/metrics")).text()
    assert 'sift_requests_refused_total{outcome="rate_limited"} 0.0' in text
    await spend(client, keys["alice"])
    for _ in range(3):
        assert (await client.get("/v1/batch", headers=auth(keys["alice"]))).status == 429
    text = await (await client.get("/metrics")).text()
    assert 'sift_requests_refused_total{outcome="rate_limited"} 3.0' in text
