"""The API skeleton: auth on /v1/*, JSON errors everywhere, healthz and metrics without a key."""

from __future__ import annotations

import pytest

from sift import config
from sift.api.app import create_app
from sift.auth import add_key


@pytest.fixture
def cfg(state_dir):
    return config.from_dict({"store": {"state_dir": str(state_dir)}})


@pytest.fixture
async def client(aiohttp_client, cfg):
    cfg.state_dir.mkdir(exist_ok=True)
    return await aiohttp_client(create_app(cfg, clock=lambda: 1000.0))


async def test_healthz_needs_no_key_and_reports_no_worker(client):
    resp = await client.get("/healthz")
    assert resp.status == 200
    assert await resp.json() == {
        "ok": True,
        "worker": {"alive": False},
        "workers": {"live": 0},
        "checked_age": 0.0,
    }


async def test_healthz_says_a_worker_is_alive_after_a_recent_heartbeat(client):
    from sift.api.appkeys import STORE, WORKER

    await client.app[STORE].worker.beat(pid=42, started_at=990.0, now=999.0)
    await client.app[WORKER].refresh()  # the background read, done now (clock is frozen)
    body = await (await client.get("/healthz")).json()
    assert body["worker"] == {"alive": True, "pid": 42, "heartbeat_age": 1.0}
    assert body["workers"] == {"live": 1}  # docs/OPERATIONS.md §Health
    await client.app[STORE].worker.beat(pid=42, started_at=990.0, now=985.0)
    await client.app[WORKER].refresh()
    assert (await (await client.get("/healthz")).json())["workers"] == {"live": 0}


async def test_v1_without_a_key_is_401_json(client):
    resp = await client.post("/v1/fetch", json={"url": "http://x/"})
    assert resp.status == 401
    assert resp.content_type == "application/json"
    assert (await resp.json())["success"] is False


async def test_v1_with_an_unknown_key_is_401(client):
    resp = await client.get("/v1/batch/abc", headers={"Authorization": "Bearer sk-sift-nope"})
    assert resp.status == 401


async def test_unknown_route_is_a_json_404_not_an_html_page(aiohttp_client, cfg):
    key = add_key(cfg.keys_file, "a")
    client = await aiohttp_client(create_app(cfg))
    resp = await client.get("/v1/nothing-here", headers={"Authorization": f"Bearer {key}"})
    assert resp.status == 404
    assert (await resp.json()) == {"success": False, "error": "no such route"}
    resp = await client.get("/nope")
    assert resp.status == 404 and resp.content_type == "application/json"


async def test_metrics_scrape_shows_every_batch_series_with_zero_values(client):
    text = await (await client.get("/metrics")).text()
    for name in (
        "sift_batch_jobs_total",
        "sift_batch_targets_total",
        "sift_batch_queue_depth",
        "sift_batch_targets_inflight",
        "sift_batch_job_seconds_bucket",
        "sift_batch_target_seconds_count",
        "sift_batch_result_bytes_sum",
        "sift_fetch_requests_total",
    ):
        assert name in text
    for outcome in (
        "created",
        "reused",
        "done",
        "partial",
        "failed",
        "cancelled",
        "restart",
        "other",
    ):
        assert f'sift_batch_jobs_total{{outcome="{outcome}"}} 0.0' in text
