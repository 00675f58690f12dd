"""sift.client against the real API and worker over loopback (docs/CLIENT.md): each route's
answer as data, each failure as the exception carrying status, error and hint."""

from __future__ import annotations

import pytest

from sift.client import (
    APIError,
    AsyncClient,
    AuthError,
    BadRequest,
    Client,
    Conflict,
    ConnectError,
    NotFound,
    ProtocolError,
)
from tests.e2e.procs import free_port


@pytest.fixture
def client(sift):
    with Client(sift.base, sift.keys["alice"]) as c:
        yield c


def test_fetch_returns_the_envelope_of_v1_fetch(sift, site, client, tag):
    url = site.url(f"/article/3?{tag}")
    got = client.fetch(url, mode="text")
    status, direct = sift.call("POST", "/v1/fetch", {"url": url, "mode": "text"})
    assert status == 200
    assert got["success"] is True and got["mode"] == "text"
    assert got["content"] == direct["content"] and got["title"] == direct["title"]


def test_a_failed_fetch_raises_with_status_error_and_hint(site, client, tag):
    with pytest.raises(APIError) as e:
        client.fetch(site.url(f"/status/404?{tag}"))
    assert (e.value.status, e.value.error, e.value.hint) == (
        502,
        "upstream answered HTTP 404",
        "recover",
    )
    assert e.value.body["upstream_status"] == 404


def test_a_refused_target_raises_422_naming_its_idx(site, client, tag):
    with pytest.raises(APIError) as e:
        client.batch_submit([site.url(f"/article/1?{tag}"), "http://127.0.0.1:22/"])
    assert e.value.status == 422 and e.value.body["idx"] == 1
    assert e.value.error.startswith("target 1: ")


def test_an_unknown_key_raises_auth_error(sift, site):
    with Client(sift.base, "sk-sift-not-a-key") as c, pytest.raises(AuthError) as e:
        c.fetch(site.url("/article/1"))
    assert e.value.status == 401


def test_submit_then_wait_returns_every_result_in_order(site, client, tag):
    urls = [site.url(f"/article/{i}?{tag}") for i in range(3)]
    sub = client.batch_submit([urls[0], {"url": urls[1], "mode": "text"}, {"url": urls[2]}])
    assert sub["status"] == "queued" and sub["targets"] == 3 and sub["reused"] is False
    seen: list[str] = []
    st = client.batch_wait(
        sub["job_id"], timeout=30, on_progress=lambda s: seen.append(s["status"])
    )
    assert st["status"] == "done" and seen[-1] == "done"
    assert [t["url"] for t in st["targets"]] == urls
    assert [t["result"]["mode"] for t in st["targets"]] == ["clean", "text", "clean"]
    again = client.batch_submit([urls[0], {"url": urls[1], "mode": "text"}, {"url": urls[2]}])
    assert again["job_id"] == sub["job_id"] and again["reused"] is True


def test_wait_returns_the_live_job_when_its_timeout_passes(site, client, tag):
    sub = client.batch_submit([site.held(tag)])
    try:
        st = client.batch_wait(sub["job_id"], timeout=0.5, results=False, round_seconds=0.2)
        assert st["status"] in ("queued", "running")
    finally:
        site.release(tag)
    assert client.batch_wait(sub["job_id"], timeout=30)["status"] == "done"


def test_cancel_stops_a_live_job_and_a_finished_job_raises_conflict(site, client, tag):
    sub = client.batch_submit([site.held(tag), site.url(f"/article/1?{tag}")])
    try:
        assert client.batch_cancel(sub["job_id"]) == {"success": True, "status": "cancelled"}
    finally:
        site.release(tag)
    st = client.batch_wait(sub["job_id"], timeout=30)
    assert st["status"] == "cancelled" and st["targets"][1]["status"] == "pending"
    done = client.batch_submit([site.url(f"/article/2?{tag}")])
    client.batch_wait(done["job_id"], timeout=30)
    with pytest.raises(Conflict) as e:
        client.batch_cancel(done["job_id"])
    assert e.value.body["status"] == "done"


def test_another_callers_job_is_not_found(sift, site, client, tag):
    sub = client.batch_submit([site.url(f"/article/4?{tag}")])
    with Client(sift.base, sift.keys["bob"]) as bob, pytest.raises(NotFound):
        bob.batch_status(sub["job_id"])


async def test_the_async_client_answers_as_the_sync_one(sift, site, tag):
    url = site.url(f"/article/5?{tag}")
    async with AsyncClient(sift.base, sift.keys["alice"]) as a:
        results = [await a.fetch(url), await a.fetch(url, mode="links")]
        sub = await a.batch_submit([url])
        st = await a.batch_wait(sub["job_id"], timeout=30)
    assert results[0]["content"] == st["targets"][0]["result"]["content"]
    assert results[1]["mode"] == "links"


async def test_the_sync_client_works_inside_a_running_event_loop(sift, site, tag):
    with Client(sift.base, sift.keys["alice"]) as c:
        assert c.fetch(site.url(f"/article/6?{tag}"))["success"] is True


def test_a_server_that_is_down_raises_connect_error():
    with Client(f"http://127.0.0.1:{free_port()}", "k") as c, pytest.raises(ConnectError):
        c.health()


def test_a_url_that_is_not_sift_raises_protocol_error(site):
    with Client(site.base, "k") as c, pytest.raises(ProtocolError, match="SIFT_URL"):
        c.batch_status("x")


# -- the batch list, retry and fresh (docs/CLIENT.md §Methods) ---------------------------------


def test_list_shows_live_jobs_first_then_the_newest_and_pages_with_a_cursor(fresh, site, tag):
    procs = fresh(batch={"jobs_per_caller": 8})
    with Client(procs.base, procs.keys["alice"]) as c:
        first = c.batch_submit([site.url(f"/article/1?{tag}")])
        c.batch_wait(first["job_id"], timeout=30)
        second = c.batch_submit([site.url(f"/article/2?{tag}")])
        c.batch_wait(second["job_id"], timeout=30)
        live = c.batch_submit([site.held(tag)])
        try:
            page = c.batch_list(limit=2)
            every = [j["job_id"] for j in c.batch_jobs(limit=1)]
        finally:
            site.release(tag)
    order = [live["job_id"], second["job_id"], first["job_id"]]
    assert [j["job_id"] for j in page["jobs"]] == order[:2] and page["next_cursor"]
    assert every == order
    assert page["jobs"][0]["status"] in ("queued", "running")


def test_a_bad_list_limit_raises_bad_request(client):
    with pytest.raises(BadRequest, match="limit"):
        client.batch_list(limit=0)


def test_retry_runs_the_failed_targets_as_a_new_job_linked_both_ways(site, client, tag):
    urls = [site.url(f"/article/1?{tag}"), site.url(f"/status/404?{tag}")]
    urls.append(site.url(f"/status/503?{tag}"))
    old = client.batch_submit(urls)
    client.batch_wait(old["job_id"], timeout=30)
    new = client.batch_retry(old["job_id"])
    assert new["retry_of"] == old["job_id"] and new["targets"] == 2
    st = client.batch_wait(new["job_id"], timeout=30)
    assert [t["url"] for t in st["targets"]] == urls[1:] and st["retry_of"] == old["job_id"]
    assert client.batch_status(old["job_id"], results=False)["retries"] == [new["job_id"]]


def test_retry_of_a_live_job_is_conflict_and_of_a_clean_job_is_422(site, client, tag):
    live = client.batch_submit([site.held(tag)])
    try:
        with pytest.raises(Conflict):
            client.batch_retry(live["job_id"])
    finally:
        site.release(tag)
    done = client.batch_submit([site.url(f"/article/3?{tag}")])
    client.batch_wait(done["job_id"], timeout=30)
    with pytest.raises(APIError) as e:
        client.batch_retry(done["job_id"])
    assert e.value.status == 422


def test_fresh_makes_a_new_job_for_a_list_just_submitted(site, client, tag):
    urls = [site.url(f"/article/4?{tag}")]
    first = client.batch_submit(urls)
    client.batch_wait(first["job_id"], timeout=30)
    again = client.batch_submit(urls, fresh=True)
    assert again["reused"] is False and again["job_id"] != first["job_id"]
