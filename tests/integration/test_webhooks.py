"""Webhooks end to end on both engines (docs/API.md §Webhooks): the API app over real HTTP on
loopback, the real worker (in process, its fetch the one seam) with its real sender, and a
real receiver on loopback that verifies every delivery with the `standardwebhooks` library
(written by others: it proves the signature format). Non-loopback addresses are only ever
fake resolver answers; the connect tripwire (tests/conftest.py) fails any real attempt."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web
from standardwebhooks.webhooks import Webhook

from sift import config
from sift.api.app import create_app
from sift.auth import add_key
from sift.errors import Upstream5xx
from sift.signing import rotate_secret, secrets_path
from sift.store import open_store
from tests.site import FakeResolver
from worker import webhooks as sender_module
from worker.process import EXIT_OK, Worker
from worker.webhooks import WebhookSender


class Receiver:
    """Answers each delivery with the next of `answers` (then 200); verifies every one."""

    def __init__(self, secret: str):
        self.webhook = Webhook(secret)
        self.got: list[tuple[str, dict]] = []  # (webhook-id, payload) of verified deliveries
        self.tries: list[str] = []  # webhook-id of every try, verified or not
        self.answers: list[tuple[int, dict]] = []
        self.delay = 0.0
        self.arrived = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        payload = self.webhook.verify(body, dict(request.headers))  # raises if not signed right
        self.tries.append(request.headers["webhook-id"])
        if self.delay:
            await asyncio.sleep(self.delay)
        status, headers = self.answers.pop(0) if self.answers else (200, {})
        if 200 <= status < 300:
            self.got.append((request.headers["webhook-id"], payload))
        self.arrived.set()
        return web.Response(status=status, headers=headers)

    async def wait_for(self, n: int, timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.got) < n:
                self.arrived.clear()
                await self.arrived.wait()


@pytest.fixture(params=["sqlite", "postgres"])
async def env(request, aiohttp_client, aiohttp_server, state_dir, monkeypatch):
    monkeypatch.delenv("SIFT_DATABASE_URL", raising=False)
    store_cfg: dict = {"state_dir": str(state_dir)}
    if request.param == "postgres":
        store_cfg.update(engine="postgres", dsn=request.getfixturevalue("pg_dsn"))
    hook_app = web.Application()
    receiver_holder: list[Receiver] = []

    async def handle(request):
        return await receiver_holder[0].handle(request)

    hook_app.router.add_post("/hook", handle)
    hook = await aiohttp_server(hook_app, host="127.0.0.1")
    cfg = config.from_dict(
        {
            "store": store_cfg,
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [8080, hook.port]},
            "batch": {"poll_interval": 0.05, "webhook_timeout": 1.0, "jobs_per_caller": 10},
        }
    )
    key = add_key(cfg.keys_file, "alice")
    add_key(cfg.keys_file, "bob")
    receiver = Receiver(rotate_secret(cfg.keys_file, "alice"))
    receiver_holder.append(receiver)
    api = await aiohttp_client(create_app(cfg))

    class Env:
        offset = 0.0  # the worker's clock runs this far ahead (to make a retry due)

        def clock(self) -> float:
            return time.time() + self.offset

        def hook_url(self, host="127.0.0.1") -> str:
            return f"http://{host}:{hook.port}/hook"

        async def submit(self, n=2, webhook=None, who=None, fail=()):
            urls = [{"url": f"http://127.0.0.1:8080/{'fail' if i in fail else 'ok'}/{i}"}
                    for i in range(n)]  # fmt: skip
            body = {"targets": urls, "fresh": True}
            if webhook is not None:
                body["webhook"] = webhook
            resp = await api.post("/v1/batch", json=body, headers=self.auth(who))
            return resp.status, await resp.json()

        def auth(self, who=None):
            return {"Authorization": f"Bearer {who or key}"}

        async def status(self, job_id):
            resp = await api.get(f"/v1/batch/{job_id}?results=false", headers=self.auth())
            return await resp.json()

        async def wait_status(self, job_id, check, timeout=15.0):
            async with asyncio.timeout(timeout):
                while not check(body := await self.status(job_id)):
                    await asyncio.sleep(0.05)
            return body

        def start_worker(self, resolver=None):
            async def fetch(claim):
                await asyncio.sleep(0.01)
                if "/fail/" in claim.url:
                    raise Upstream5xx("upstream returned 503")
                return {"success": True, "url": claim.url}

            worker = Worker(
                cfg, fetch=fetch, handle_signals=False, clock=self.clock, resolver=resolver
            )
            return worker, asyncio.create_task(worker.run())

    e = Env()
    e.api, e.cfg, e.receiver, e.engine = api, cfg, receiver, request.param
    running: list = []
    original = e.start_worker

    def start_worker(resolver=None):
        worker, task = original(resolver)
        running.append((worker, task))
        return worker, task

    e.start_worker = start_worker
    yield e
    for worker, task in running:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def test_each_delivery_is_signed_as_standard_webhooks_say_and_carries_its_event(env):
    env.start_worker()
    status, body = await env.submit(
        3, webhook={"url": env.hook_url(), "events": ["target.*", "job.*"]}, fail=(1,)
    )
    assert status == 202, body
    await env.receiver.wait_for(5)
    ids = [i for i, _ in env.receiver.got]
    types = [p["type"] for _, p in env.receiver.got]
    assert sorted(types) == sorted(
        ["job.running", "target.done", "target.failed", "target.done", "job.partial"]
    )
    assert len(set(ids)) == 5
    end = next(p for _, p in env.receiver.got if p["type"] == "job.partial")
    assert end["data"]["job_id"] == body["job_id"] and end["data"]["targets_failed"] == 1
    failed = next(p for _, p in env.receiver.got if p["type"] == "target.failed")
    assert "url" not in failed["data"] and "result" not in failed["data"]  # small bodies
    status = await env.wait_status(
        body["job_id"], lambda s: s.get("webhook", {}).get("state") == "delivered"
    )
    assert status["webhook"]["deliveries"] == 5 and status["webhook"]["last_status"] == 200


async def test_a_delivery_carries_the_result_when_the_webhook_asks_for_it(env):
    env.start_worker()
    hook = {"url": env.hook_url(), "events": ["target.done"], "results": True}
    status, _ = await env.submit(1, webhook=hook)
    assert status == 202
    await env.receiver.wait_for(1)
    ((_, payload),) = env.receiver.got
    assert payload["data"]["result"] == {"success": True, "url": "http://127.0.0.1:8080/ok/0"}


async def test_by_default_only_the_terminal_event_is_delivered(env):
    env.start_worker()
    _, body = await env.submit(2, webhook=env.hook_url())
    await env.receiver.wait_for(1)
    await asyncio.sleep(0.3)
    assert [p["type"] for _, p in env.receiver.got] == ["job.done"]
    assert env.receiver.got[0][0] == f"msg_{body['job_id']}_4"


async def test_a_receiver_that_fails_then_recovers_gets_it_with_the_same_webhook_id(env):
    env.receiver.answers = [(500, {}), (429, {"Retry-After": "1"})]
    env.start_worker()
    _, body = await env.submit(1, webhook=env.hook_url())
    job = body["job_id"]
    pending = await env.wait_status(job, lambda s: s.get("webhook", {}).get("attempts") == 1)
    assert pending["webhook"]["state"] == "pending" and pending["webhook"]["last_status"] == 500
    env.offset = 15.0  # past the first wait (10 s ± 20 %)
    await env.wait_status(job, lambda s: s.get("webhook", {}).get("last_status") == 429)
    env.offset = 45.0  # the second wait (60 s ± 20 %) is longer than the Retry-After asked
    await asyncio.sleep(0.3)
    assert len(env.receiver.tries) == 2  # not before the backoff's own wait
    env.offset = 100.0  # past the longest second wait (72 s)
    await env.receiver.wait_for(1)
    assert env.receiver.tries == [f"msg_{job}_3"] * 3
    done = await env.wait_status(job, lambda s: s["webhook"]["state"] == "delivered")
    assert done["webhook"]["attempts"] == 3
    metrics = await (await env.api.get("/metrics")).text()
    assert 'sift_webhook_deliveries_total{outcome="retry"} 2.0' in metrics
    assert 'sift_webhook_deliveries_total{outcome="delivered"} 1.0' in metrics


async def test_a_410_stops_the_delivery_and_redeliver_sends_it_again(env):
    env.receiver.answers = [(410, {})]
    env.start_worker()
    _, body = await env.submit(1, webhook=env.hook_url())
    job = body["job_id"]
    gone = await env.wait_status(job, lambda s: s.get("webhook", {}).get("state") == "failed")
    assert gone["webhook"]["last_status"] == 410
    env.offset = 4000.0
    await asyncio.sleep(0.3)
    assert len(env.receiver.tries) == 1
    env.offset = 0.0
    resp = await env.api.post(f"/v1/batch/{job}/webhook/redeliver", headers=env.auth())
    assert resp.status == 202 and (await resp.json())["redelivering"] == 1
    await env.receiver.wait_for(1)
    assert env.receiver.tries == [f"msg_{job}_3"] * 2


async def test_redeliver_is_owner_only_and_409_for_a_job_without_webhook(env):
    _, body = await env.submit(1)
    job = body["job_id"]
    other = add_key(env.cfg.keys_file, "carol")
    theirs = await env.api.post(f"/v1/batch/{job}/webhook/redeliver", headers=env.auth(other))
    assert theirs.status == 404
    mine = await env.api.post(f"/v1/batch/{job}/webhook/redeliver", headers=env.auth())
    assert mine.status == 409 and (await mine.json())["error"] == "this job has no webhook"


async def test_a_worker_restart_with_deliveries_pending_loses_none(env):
    env.receiver.answers = [(503, {})]
    worker, task = env.start_worker()
    _, body = await env.submit(2, webhook={"url": env.hook_url(), "events": ["target.*"]})
    job = body["job_id"]
    await env.receiver.wait_for(1)  # one delivered, the other answered 503 (order aside)
    await env.wait_status(job, lambda s: s["status"] == "done" and "webhook" in s)
    await env.wait_status(job, lambda s: s["webhook"]["state"] == "pending")
    worker.stop()
    assert await asyncio.wait_for(task, 15) == EXIT_OK
    env.offset = 15.0
    env.start_worker()
    await env.receiver.wait_for(2)
    assert sorted(i for i, _ in env.receiver.got) == [f"msg_{job}_2", f"msg_{job}_3"]
    assert sorted(env.receiver.tries) == sorted(
        [f"msg_{job}_2", f"msg_{job}_3", env.receiver.tries[0]]
    )


async def test_a_private_address_webhook_is_refused_at_submit(env):
    for url in ("http://10.0.0.7/hook", "http://192.168.1.1:8080/", "http://169.254.169.254/"):
        status, body = await env.submit(1, webhook=url)
        assert status == 422, body
        assert body["error"].startswith("webhook url: ")


async def test_a_webhook_whose_name_now_resolves_to_a_private_address_is_refused_at_delivery(
    env,
):
    env.start_worker(resolver=FakeResolver({"hooks.test": ["10.1.2.3"]}))
    status, body = await env.submit(1, webhook=env.hook_url("hooks.test"))
    assert status == 202, body  # a name is judged when it is resolved: at each delivery
    state = await env.wait_status(
        body["job_id"], lambda s: s.get("webhook", {}).get("state") == "failed"
    )
    assert state["webhook"]["last_status"] == 0 and env.receiver.tries == []
    metrics = await (await env.api.get("/metrics")).text()
    assert 'sift_webhook_deliveries_total{outcome="refused"} 1.0' in metrics


async def test_a_slow_receiver_is_bounded_and_the_drain_goes_on(env):
    env.receiver.delay = 5.0  # far past [batch] webhook_timeout (1 s)
    env.start_worker()
    started = time.monotonic()
    _, body = await env.submit(6, webhook={"url": env.hook_url(), "events": ["target.*"]})
    await env.wait_status(body["job_id"], lambda s: s["status"] == "done")
    assert time.monotonic() - started < 4.0  # six targets stored while deliveries hang
    state = await env.wait_status(
        body["job_id"],
        lambda s: s.get("webhook", {}).get("attempts") == 1 and s["webhook"]["last_status"] == 0,
        timeout=5.0,
    )
    assert time.monotonic() - started < 4.9  # each try ended at its timeout, not the answer
    assert state["webhook"]["state"] == "pending"


async def test_a_webhook_needs_the_callers_secret_and_a_well_formed_field(env):
    bob = add_key(env.cfg.keys_file, "bob2")
    status, body = await env.submit(1, webhook=env.hook_url(), who=bob)
    assert status == 422 and "webhook-secret" in body["error"]
    url = env.hook_url()
    bads = (5, {"url": url, "events": ["nope"]}, {"events": ["job.*"]},
            {"url": url, "secret": "x"}, {"url": url, "events": []})  # fmt: skip
    for bad in bads:
        status, body = await env.submit(1, webhook=bad)
        assert status == 400, bad
        assert body["error"].startswith(("webhook", '"webhook"'))


async def test_a_redirect_is_never_followed_and_counts_as_a_failed_try(env):
    env.receiver.answers = [(307, {"Location": env.hook_url() + "?moved"})]
    env.start_worker()
    _, body = await env.submit(1, webhook=env.hook_url())
    state = await env.wait_status(
        body["job_id"], lambda s: s.get("webhook", {}).get("last_status") == 307
    )
    await asyncio.sleep(0.3)
    assert state["webhook"]["state"] == "pending" and len(env.receiver.tries) == 1


async def test_on_postgres_a_delivery_is_sent_without_waiting_for_a_poll(env, monkeypatch):
    """docs/WORKER.md §Webhook sender: on PostgreSQL the sender is woken by the notification
    of the queued delivery, not by its next poll: with a 5 s tick and a 30 s idle poll, a
    cancelled job's event is delivered in a fraction of the tick."""
    if env.engine != "postgres":
        pytest.skip("SQLite has no notifications: the sender watches the change counter")
    monkeypatch.setattr(sender_module, "IDLE_POLL", 30.0)
    store = open_store(env.cfg)
    tick = 5.0
    sender = WebhookSender(store, env.cfg, tick=tick)
    task = asyncio.create_task(sender.run())
    try:
        await asyncio.sleep(0.3)  # the sender has looked once and sleeps
        status, body = await env.submit(2, webhook={"url": env.hook_url()})
        assert status == 202, body
        t0 = time.monotonic()
        resp = await env.api.delete(f"/v1/batch/{body['job_id']}", headers=env.auth())
        assert resp.status == 200
        await env.receiver.wait_for(1, timeout=2 * tick)
        took = time.monotonic() - t0
        assert [p["type"] for _, p in env.receiver.got] == ["job.cancelled"]
        assert took < tick / 5, took
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.aclose()


async def _retry(env, job, body=None):
    resp = await env.api.post(f"/v1/batch/{job}/retry", json=body or {}, headers=env.auth())
    return resp.status, await resp.json()


async def test_a_retry_keeps_the_old_jobs_webhook(env):
    """docs/API.md §POST /v1/batch/{job_id}/retry: whoever heard of the first end hears of the
    retry's."""
    env.start_worker()
    hook = {"url": env.hook_url(), "events": ["job.*"], "results": False}
    _, body = await env.submit(2, webhook=hook, fail=(1,))
    await env.receiver.wait_for(2)  # job.running, job.partial
    status, again = await _retry(env, body["job_id"])
    assert status == 202, again
    await env.receiver.wait_for(4)
    theirs = [p for _, p in env.receiver.got if p["data"]["job_id"] == again["job_id"]]
    assert [p["type"] for p in theirs] == ["job.running", "job.failed"]


async def test_a_retry_body_names_another_webhook_or_none(env):
    env.start_worker()
    _, body = await env.submit(1, webhook=env.hook_url(), fail=(0,))
    await env.receiver.wait_for(1)
    job = body["job_id"]
    status, none = await _retry(env, job, {"webhook": None})
    assert status == 202
    status, other = await _retry(env, job, {"webhook": env.hook_url() + "?second"})
    assert status == 202
    await env.receiver.wait_for(2)
    await env.wait_status(none["job_id"], lambda s: s["status"] == "failed")
    await asyncio.sleep(0.3)
    jobs = [p["data"]["job_id"] for _, p in env.receiver.got]
    assert jobs == [job, other["job_id"]]
    bad = await _retry(env, job, {"webhook": {"url": "http://10.0.0.1/hook"}})
    assert bad[0] == 422 and bad[1]["error"].startswith("webhook url: ")
    malformed = await _retry(env, job, {"webhook": {"url": env.hook_url(), "x": 1}})
    assert malformed[0] == 400


async def test_a_kept_webhook_is_checked_again_as_a_submits_would_be(env):
    """docs/API.md §POST /v1/batch/{job_id}/retry: a caller whose signing secret is gone gets
    the submit's 422, not a job whose deliveries cannot be signed."""
    env.start_worker()
    _, body = await env.submit(1, webhook=env.hook_url(), fail=(0,))
    await env.receiver.wait_for(1)
    secrets_path(env.cfg.keys_file).unlink()
    status, answer = await _retry(env, body["job_id"])
    assert status == 422 and "webhook secret" in answer["error"]
    status, _ = await _retry(env, body["job_id"], {"webhook": None})
    assert status == 202


async def test_on_sqlite_the_sender_is_woken_by_commits_and_nudges_never_a_tick(env, monkeypatch):
    """docs/WORKER.md §Webhook sender: on SQLite the sender wakes when the worker's own commit
    queues a delivery, and on the API's nudge after a cancel or a redeliver; it never reads
    the change counter. With a 30 s idle poll, each delivery still goes out at once."""
    if env.engine != "sqlite":
        pytest.skip("PostgreSQL wakes the sender by notification (the test above)")
    from sift.store import Store

    reads = []
    counter = Store.data_version

    async def counted(self):
        reads.append(1)
        return await counter(self)

    monkeypatch.setattr(Store, "data_version", counted)
    monkeypatch.setattr(sender_module, "IDLE_POLL", 30.0)
    env.start_worker()
    await asyncio.sleep(0.3)  # the sender has looked once and sleeps
    t0 = time.monotonic()
    _, done = await env.submit(1, webhook={"url": env.hook_url()})
    await env.receiver.wait_for(1, timeout=5)  # the worker's own finish queued it
    resp = await env.api.post(f"/v1/batch/{done['job_id']}/webhook/redeliver", headers=env.auth())
    assert resp.status == 202
    await env.receiver.wait_for(2, timeout=5)  # the API's redeliver, by nudge
    status, long = await env.submit(20, webhook={"url": env.hook_url()})
    assert status == 202, long
    resp = await env.api.delete(f"/v1/batch/{long['job_id']}", headers=env.auth())
    assert resp.status == 200
    await env.receiver.wait_for(3, timeout=5)  # the API's cancel, by nudge
    assert time.monotonic() - t0 < 5
    kinds = [p["type"] for _, p in env.receiver.got]
    assert kinds == ["job.done", "job.done", "job.cancelled"]
    assert env.receiver.got[0][0] == env.receiver.got[1][0]  # the same webhook-id again
    assert reads == []


async def test_an_idle_sender_takes_nothing_until_a_delivery_is_due(env, monkeypatch):
    """docs/WORKER.md §Webhook sender: a sleep that ran out reads the earliest due time and
    takes (a write) only when one is due: an idle sender writes nothing, however often it
    looks."""
    monkeypatch.setattr(sender_module, "IDLE_POLL", 0.02)
    store = open_store(env.cfg)
    takes = []
    take = store.webhooks.take

    async def counted(*args, **kwargs):
        takes.append(1)
        return await take(*args, **kwargs)

    store.webhooks.take = counted
    sender = WebhookSender(store, env.cfg)
    task = asyncio.create_task(sender.run())
    try:
        await asyncio.sleep(0.1)
        first = len(takes)  # the start takes once, as a wake-up does
        await asyncio.sleep(0.4)  # about 20 looks
        assert len(takes) == first <= 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.aclose()
