"""/v1/batch wire rules served by the API app (no worker: jobs stay queued here)."""

from __future__ import annotations

import asyncio

import pytest

from sift import config
from sift.api.app import create_app
from sift.auth import add_key


@pytest.fixture
async def env(aiohttp_client, state_dir):
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [80, 8080]},
        }
    )
    keys = {n: add_key(cfg.keys_file, n) for n in ("alice", "bob")}
    client = await aiohttp_client(create_app(cfg))

    class Env:
        async def call(self, method, path, body=None, who="alice", raw=None):
            headers = {"Authorization": f"Bearer {keys[who]}"}
            if raw is not None:
                headers["Content-Type"] = "application/json"
            resp = await client.request(method, path, json=body, data=raw, headers=headers)
            return resp.status, await resp.json()

    e = Env()
    e.client = client
    return e


def targets(n, port=8080):
    return [{"url": f"http://127.0.0.1:{port}/p/{i}"} for i in range(n)]


async def test_submit_is_202_with_a_job_id(env):
    status, body = await env.call("POST", "/v1/batch", {"targets": targets(3)})
    assert status == 202
    assert body["success"] is True and body["status"] == "queued"
    assert body["targets"] == 3 and body["reused"] is False and len(body["job_id"]) == 32


async def test_resubmitting_the_same_list_reuses_the_job(env):
    _, first = await env.call("POST", "/v1/batch", {"targets": targets(2)})
    status, again = await env.call("POST", "/v1/batch", {"targets": targets(2)})
    assert status == 202 and again["reused"] is True and again["job_id"] == first["job_id"]


async def test_a_target_refused_by_the_pre_check_is_422_naming_its_idx(env):
    t = targets(3)
    t[2]["url"] = "http://127.0.0.1:22/"
    status, body = await env.call("POST", "/v1/batch", {"targets": t})
    assert status == 422
    assert body["idx"] == 2 and body["error"].startswith("target 2: ")


async def test_33_targets_are_422(env):
    status, body = await env.call("POST", "/v1/batch", {"targets": targets(33)})
    assert status == 422 and "too many targets" in body["error"]


async def test_empty_and_malformed_submits_are_400(env):
    for payload in (
        {"targets": []},
        {},
        {"targets": "x"},
        {"targets": [{"url": 1}]},
        {"targets": [{}], "extra": 1},
    ):
        status, body = await env.call("POST", "/v1/batch", payload)
        assert status == 400, payload
        assert body["success"] is False
    status, _ = await env.call("POST", "/v1/batch", raw=b"{nope")
    assert status == 400


async def test_a_body_over_256_kib_is_413(env):
    status, _ = await env.call("POST", "/v1/batch", raw=b'{"targets": "' + b"a" * 262200 + b'"}')
    assert status == 413


async def test_a_second_live_job_of_the_same_caller_is_429(env):
    await env.call("POST", "/v1/batch", {"targets": targets(1)})
    status, body = await env.call("POST", "/v1/batch", {"targets": targets(2)})
    assert status == 429 and body["hint"] == "retry"


async def test_status_shows_pending_targets_in_idx_order(env):
    _, sub = await env.call("POST", "/v1/batch", {"targets": targets(3)})
    status, body = await env.call("GET", f"/v1/batch/{sub['job_id']}")
    assert status == 200
    assert body["status"] == "queued" and body["error"] == ""
    assert (body["targets_total"], body["targets_done"]) == (3, 0)
    assert body["created_at"].endswith("Z")
    assert [t["idx"] for t in body["targets"]] == [0, 1, 2]
    assert all(t["status"] == "pending" for t in body["targets"])


async def test_another_callers_job_is_404_exactly_like_an_unknown_id(env):
    _, sub = await env.call("POST", "/v1/batch", {"targets": targets(1)})
    theirs = await env.call("GET", f"/v1/batch/{sub['job_id']}", who="bob")
    unknown = await env.call("GET", "/v1/batch/" + "0" * 32, who="bob")
    assert theirs == unknown and theirs[0] == 404
    assert await env.call("DELETE", f"/v1/batch/{sub['job_id']}", who="bob") == unknown


async def test_cancel_is_200_and_again_200(env):
    _, sub = await env.call("POST", "/v1/batch", {"targets": targets(2)})
    path = f"/v1/batch/{sub['job_id']}"
    assert await env.call("DELETE", path) == (200, {"success": True, "status": "cancelled"})
    assert await env.call("DELETE", path) == (200, {"success": True, "status": "cancelled"})
    _, body = await env.call("GET", path)
    assert body["status"] == "cancelled"


@pytest.mark.parametrize("query", ["wait=-1", "wait=61", "wait=soon", "results=maybe"])
async def test_bad_read_options_are_400(env, query):
    _, sub = await env.call("POST", "/v1/batch", {"targets": targets(1)})
    status, _ = await env.call("GET", f"/v1/batch/{sub['job_id']}?{query}")
    assert status == 400


async def test_wait_returns_as_soon_as_the_job_ends(env):
    _, sub = await env.call("POST", "/v1/batch", {"targets": targets(1)})
    path = f"/v1/batch/{sub['job_id']}"
    held = asyncio.create_task(env.call("GET", f"{path}?wait=30"))
    await asyncio.sleep(0.2)
    assert not held.done()
    await env.call("DELETE", path)
    status, body = await asyncio.wait_for(held, 5)
    assert status == 200 and body["status"] == "cancelled"
