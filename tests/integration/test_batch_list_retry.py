"""The batch API for people and agents (docs/API.md): bare lists, `fresh`, `worker`, the job
list, retry with its links, and `caller busy` naming the live job. The app runs over loopback
on a real database file; jobs are ended by driving the store as the worker would."""

from __future__ import annotations

import orjson
import pytest

from sift import config
from sift.api.app import create_app
from sift.api.appkeys import STORE
from sift.auth import add_key
from sift.timefmt import rfc3339
from tests.clock import Clock
from tests.dbview import view
from tests.finish import finish_all

T0 = 1_700_000_000.0
TTL = 3600.0


@pytest.fixture
async def env(aiohttp_client, state_dir):
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [8080]},
            "batch": {"jobs_per_caller": 4, "ttl": TTL},
        }
    )
    keys = {n: add_key(cfg.keys_file, n) for n in ("alice", "bob")}
    clock = Clock(T0)
    client = await aiohttp_client(create_app(cfg, clock=clock))

    class Env:
        store = client.app[STORE]

        async def call(self, method, path, body=None, who="alice"):
            headers = {"Authorization": f"Bearer {keys[who]}"}
            resp = await client.request(method, path, json=body, headers=headers)
            return resp.status, await resp.json()

        async def submit(self, targets, who="alice", **extra):
            status, body = await self.call("POST", "/v1/batch", {"targets": targets, **extra}, who)
            assert status == 202, body
            return body["job_id"]

    e = Env()
    e.clock = clock
    return e


def url(name: str) -> str:
    return f"http://127.0.0.1:8080/{name}"


# -- submit shapes ----------------------------------------------------------------------------


async def test_a_bare_list_of_url_strings_is_a_whole_submit_body(env):
    status, body = await env.call(
        "POST", "/v1/batch", [url("a"), {"url": url("b"), "mode": "text"}]
    )
    assert status == 202 and body["targets"] == 2
    _, job = await env.call("GET", f"/v1/batch/{body['job_id']}")
    assert [t["url"] for t in job["targets"]] == [url("a"), url("b")]


@pytest.mark.parametrize(
    "payload", [{"targets": [url("a")], "fresh": "yes"}, {"targets": [url("a")], "other": 1}, [1]]
)
async def test_a_malformed_submit_body_is_400(env, payload):
    status, body = await env.call("POST", "/v1/batch", payload)
    assert status == 400 and body["success"] is False


async def test_a_reused_job_says_so_and_fresh_makes_a_new_one(env):
    first = await env.submit([url("a"), url("b")])
    await finish_all(env.store, first, T0, ["ok", "upstream_4xx"])
    _, again = await env.call("POST", "/v1/batch", {"targets": [url("a"), url("b")]})
    assert again["job_id"] == first and again["reused"] is True
    assert "(status partial)" in again["note"] and '"fresh": true' in again["note"]
    _, fresh = await env.call("POST", "/v1/batch", {"targets": [url("a"), url("b")], "fresh": True})
    assert fresh["reused"] is False and fresh["job_id"] != first and "note" not in fresh
    _, later = await env.call("POST", "/v1/batch", [url("a"), url("b")])
    assert later["job_id"] == fresh["job_id"] and later["reused"] is True


async def test_caller_busy_names_the_callers_live_job(env):
    live = [await env.submit([url(f"busy{i}")]) for i in range(4)]
    status, body = await env.call("POST", "/v1/batch", [url("one-too-many")])
    assert status == 429 and body["job_id"] == live[0]
    assert body["error"].startswith(f"caller busy: your job {live[0]} is still live")


async def test_submit_and_status_say_when_no_worker_is_alive(env):
    _, body = await env.call("POST", "/v1/batch", [url("w")])
    assert (body["worker"], body["warning"]) == (
        "down",
        "no worker is running; the job is queued and starts when one does",
    )
    _, job = await env.call("GET", f"/v1/batch/{body['job_id']}")
    assert job["worker"] == "down" and "no worker" in job["warning"]
    await env.store.worker.beat(4242, T0, T0 + 5)
    env.clock.now = T0 + 6  # past the one-second reuse of the last answer
    _, job = await env.call("GET", f"/v1/batch/{body['job_id']}")
    assert job["worker"] == "up" and "warning" not in job
    env.clock.now = T0 + 5 + 15  # the heartbeat is [store] worker_dead_after old: stale
    _, job = await env.call("GET", f"/v1/batch/{body['job_id']}")
    assert job["worker"] == "down"


async def test_status_counts_failed_targets_and_says_when_the_job_expires(env):
    job_id = await env.submit([url("s1"), url("s2"), url("s3")])
    await finish_all(env.store, job_id, T0 + 1, ["ok", "timeout", "upstream_4xx"])
    env.clock.now = T0 + 30
    _, job = await env.call("GET", f"/v1/batch/{job_id}")
    assert (job["targets_done"], job["targets_failed"]) == (3, 2)
    assert job["expires_at"] == rfc3339(T0 + 30 + TTL)  # this read slid the lease
    assert (job["retry_of"], job["retries"]) == (None, [])


# -- the job list -----------------------------------------------------------------------------


async def test_the_list_shows_live_jobs_first_then_ended_ones_newest_first(env):
    ids = []
    for i in range(4):
        env.clock.now = T0 + i
        ids.append(await env.submit([url(f"l{i}")]))
    await finish_all(env.store, ids[0], T0 + 10, ["ok"])
    await finish_all(env.store, ids[2], T0 + 10, ["timeout"])
    await env.submit([url("bob")], who="bob")
    env.clock.now = T0 + 20
    status, body = await env.call("GET", "/v1/batch")
    assert status == 200 and body["next_cursor"] is None
    assert [j["job_id"] for j in body["jobs"]] == [ids[3], ids[1], ids[2], ids[0]]
    assert body["jobs"][2] == {
        "job_id": ids[2],
        "status": "failed",
        "targets_total": 1,
        "targets_done": 1,
        "targets_failed": 1,
        "created_at": rfc3339(T0 + 2),
        "expires_at": rfc3339(T0 + 10 + TTL),
        "retry_of": None,
    }


async def test_the_list_pages_through_every_job_once_with_its_cursor(env):
    ids = set()
    for i in range(7):
        env.clock.now = T0 + i // 2  # pairs share a creation time: the id breaks the tie
        job_id = await env.submit([url(f"p{i}")])
        ids.add(job_id)
        if i < 4:
            await finish_all(env.store, job_id, env.clock.now, ["ok"])
    seen, cursor, pages = [], None, 0
    while True:
        query = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        status, body = await env.call("GET", f"/v1/batch{query}")
        assert status == 200 and len(body["jobs"]) <= 2
        seen += [j["job_id"] for j in body["jobs"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 4 and len(seen) == 7 and set(seen) == ids


async def test_expired_jobs_are_not_listed(env):
    await env.submit([url("old")])
    env.clock.now = T0 + TTL + 1
    _, body = await env.call("GET", "/v1/batch")
    assert body["jobs"] == []


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=101", "limit=ten", "cursor=%%%", "cursor=WzEsMl0", "page=2"]
)
async def test_a_bad_limit_cursor_or_parameter_is_400(env, query):
    status, body = await env.call("GET", f"/v1/batch?{query}")
    assert status == 400 and body["success"] is False


# -- retry ------------------------------------------------------------------------------------


async def test_retry_makes_a_new_job_of_the_failed_targets_linked_both_ways(env):
    targets = [url("r0"), {"url": url("r1"), "mode": "text", "grep": "x"}, url("r2"), url("r3")]
    old = await env.submit(targets)
    await finish_all(env.store, old, T0 + 1, ["ok", "timeout", "ok", "upstream_4xx"])
    status, body = await env.call("POST", f"/v1/batch/{old}/retry")
    assert status == 202 and body["retry_of"] == old and body["targets"] == 2
    assert body["reused"] is False and body["status"] == "queued"
    _, new = await env.call("GET", f"/v1/batch/{body['job_id']}")
    assert [t["url"] for t in new["targets"]] == [url("r1"), url("r3")]
    assert [t["idx"] for t in new["targets"]] == [0, 1]
    assert new["retry_of"] == old
    _, was = await env.call("GET", f"/v1/batch/{old}")
    assert was["retries"] == [body["job_id"]]
    _, listed = await env.call("GET", "/v1/batch")
    assert listed["jobs"][0]["retry_of"] == old


async def test_a_retry_keeps_each_targets_options(env):
    old = await env.submit([{"url": url("o1"), "mode": "text", "grep": "needle"}])
    await finish_all(env.store, old, T0 + 1, ["timeout"])
    _, body = await env.call("POST", f"/v1/batch/{old}/retry")
    options = view(env.store).targets(body["job_id"])[0].options
    assert orjson.loads(options) == {"mode": "text", "grep": "needle"}


async def test_only_retryable_keeps_the_failures_worth_trying_again(env):
    old = await env.submit([url("q0"), url("q1"), url("q2")])
    await finish_all(env.store, old, T0 + 1, ["upstream_4xx", "timeout", "upstream_4xx"])
    _, body = await env.call("POST", f"/v1/batch/{old}/retry", {"only_retryable": True})
    _, new = await env.call("GET", f"/v1/batch/{body['job_id']}")
    assert [t["url"] for t in new["targets"]] == [url("q1")]


async def test_retrying_a_live_job_is_409_and_a_job_without_failures_422(env):
    live = await env.submit([url("v0")])
    status, body = await env.call("POST", f"/v1/batch/{live}/retry")
    assert status == 409 and body["status"] == "queued"
    await finish_all(env.store, live, T0 + 1, ["ok"])
    status, body = await env.call("POST", f"/v1/batch/{live}/retry")
    assert status == 422 and body["error"].startswith("nothing to retry")
    status, _ = await env.call("POST", f"/v1/batch/{live}/retry", {"only_retryable": "no"})
    assert status == 400


async def test_another_callers_job_cannot_be_retried_and_looks_unknown(env):
    old = await env.submit([url("x0")])
    await finish_all(env.store, old, T0 + 1, ["timeout"])
    theirs = await env.call("POST", f"/v1/batch/{old}/retry", who="bob")
    unknown = await env.call("POST", "/v1/batch/" + "0" * 32 + "/retry", who="bob")
    assert theirs == unknown and theirs[0] == 404


async def test_a_retry_counts_against_the_callers_live_jobs(env):
    old = await env.submit([url("c0")])
    await finish_all(env.store, old, T0 + 1, ["timeout"])
    live = [await env.submit([url(f"c-live{i}")]) for i in range(4)]
    status, body = await env.call("POST", f"/v1/batch/{old}/retry")
    assert status == 429 and body["job_id"] == live[0]


async def test_a_cancelled_jobs_unfetched_targets_are_retried_with_its_failed_ones(env):
    old = await env.submit([url("k0"), url("k1"), url("k2")])
    await finish_all(env.store, old, T0 + 1, ["upstream_4xx"])
    await env.call("DELETE", f"/v1/batch/{old}")
    _, body = await env.call("POST", f"/v1/batch/{old}/retry", {"only_retryable": True})
    _, new = await env.call("GET", f"/v1/batch/{body['job_id']}")
    assert [t["url"] for t in new["targets"]] == [url("k1"), url("k2")]
    status, body = await env.call("POST", f"/v1/batch/{old}/retry")
    assert (status, body["targets"]) == (202, 3)
    _, was = await env.call("GET", f"/v1/batch/{old}")
    assert len(was["retries"]) == 2
