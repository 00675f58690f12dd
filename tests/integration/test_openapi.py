"""The OpenAPI document against the running server: every route and every status it answers.

Each scenario drives one real request (loopback test site, canned DNS, a real database file,
the real batch runner draining in-process) and checks that the server's (route, method,
status) is documented and that the body validates against the documented schema. A second
test checks the converse: every documented status has a scenario that produces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import apsw
import pypdfium2 as pdfium
import pytest
from aiohttp import web
from jsonschema import Draft202012Validator, FormatChecker
from openapi_spec_validator import validate as validate_spec
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from sift import about, config
from sift.api.app import create_app
from sift.api.appkeys import CONFIG, PIPELINE, READS, STORE
from sift.api.openapi_routes import document
from sift.auth import Caller, add_key
from sift.constants import WAIT_MAX
from sift.errors import SiftError
from sift.fetch import target
from sift.fetch.target import Target
from sift.signing import rotate_secret
from sift.status import JobStatus
from tests.clock import Clock
from tests.site import HITS, FakeResolver, make_site
from worker.drain import Runner

DOC = json.loads(document())
DOC_URI = "urn:sift:openapi"
REGISTRY = Registry().with_resource(DOC_URI, Resource(contents=DOC, specification=DRAFT202012))
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

# Documented, but no request can produce them on purpose: these routes only read, a WAL read
# does not wait for a writer, so they meet a busy database only in rare checkpoint races.
# Reads almost never wait on a lock, so these 503s cannot be driven on demand.
NOT_DRIVEN = {
    ("/metrics", "get", 503),
    ("/v1/batch/{job_id}", "get", 503),
    ("/v1/batch/{job_id}/events", "get", 503),
    ("/v1/batch", "get", 503),
}


def documented() -> set[tuple[str, str, int]]:
    return {
        (path, method, int(status))
        for path, item in DOC["paths"].items()
        for method, op in item.items()
        if method in METHODS
        for status in op["responses"]
    }


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def response_validator(path: str, method: str, status: int, media: str) -> Draft202012Validator:
    responses = DOC["paths"][path][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {path} {status} is not documented"
    entry, base = responses[str(status)], ("paths", path, method, "responses", str(status))
    if "$ref" in entry:
        name = entry["$ref"].rsplit("/", 1)[1]
        entry, base = DOC["components"]["responses"][name], ("components", "responses", name)
    assert media in entry.get("content", {}), f"{path} {status}: {media} not documented"
    ref = f"{DOC_URI}#/{_pointer(*base, 'content', media, 'schema')}"
    return Draft202012Validator({"$ref": ref}, registry=REGISTRY, format_checker=FormatChecker())


RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _times(value, key=""):
    """Every (key, value) of an `*_at` field, however deep."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _times(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _times(v, key)
    elif key.endswith("_at"):
        yield key, value


def blank_pdf(pages: int = 2) -> bytes:
    doc = pdfium.PdfDocument.new()
    try:
        for _ in range(pages):
            doc.new_page(612, 792).close()
        out = io.BytesIO()
        doc.save(out)
        return out.getvalue()
    finally:
        doc.close()


@dataclass
class Env:
    client: object
    base: str
    key: str
    clock: Clock
    app: web.Application
    site: web.Application
    db_path: object

    @property
    def auth(self) -> dict:
        return {"Authorization": f"Bearer {self.key}"}

    def url(self, path: str) -> str:
        return self.base + path

    async def fetch(self, body: dict):
        return await self.client.post("/v1/fetch", json=body, headers=self.auth)

    async def submit(self, urls: list[str]):
        body = {"targets": [{"url": self.url(u)} for u in urls]}
        return await self.client.post("/v1/batch", json=body, headers=self.auth)

    async def job(self, urls: list[str]) -> str:
        resp = await self.submit(urls)
        assert resp.status == 202, await resp.text()
        return (await resp.json())["job_id"]

    async def drained_job(self, urls: list[str]) -> str:
        """A job that the real runner has drained to a terminal status."""
        job_id = await self.job(urls)
        pipeline, store = self.app[PIPELINE], self.app[STORE]

        async def fetch(claim):
            caller = Caller(claim.caller, cls=claim.caller_class)
            return await pipeline.fetch_target(caller, Target.from_stored(claim.url, claim.options))

        cfg = config.from_dict({"batch": {"poll_interval": 0.05, "retry_wait": 0.05}}).batch
        runner = Runner(store, cfg, fetch)
        task = asyncio.create_task(runner.run())
        try:
            resp = await self.client.get(f"/v1/batch/{job_id}?wait=20", headers=self.auth)
            assert (await resp.json())["status"] in ("done", "partial", "failed")
        finally:
            await runner.shutdown(1.0)
            await task
        return job_id

    @contextlib.contextmanager
    def write_locked(self):
        """Another connection holds the database's write lock (as a busy worker would)."""
        conn = apsw.Connection(str(self.db_path))
        conn.cursor().execute("begin immediate")
        try:
            yield
        finally:
            conn.cursor().execute("rollback")
            conn.close()


@pytest.fixture
async def env(aiohttp_server, aiohttp_client, state_dir):
    site_app = make_site()
    pdf = blank_pdf()

    async def report(request):
        return web.Response(body=pdf, content_type="application/pdf")

    site_app.router.add_get("/report.pdf", report)
    site = await aiohttp_server(site_app)
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir), "busy_timeout": 0.1},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
            "recover": {"archive_url": f"http://127.0.0.1:{site.port}"},
            "fetch": {"timeout": 1, "max_body": 1024 * 1024, "output_cap": 2000},
            "gates": {"per_caller": 1},
            "batch": {"targets_per_job": 3, "jobs_per_caller": 1},
        }
    )
    key = add_key(cfg.keys_file, "agent")
    rotate_secret(cfg.keys_file, "agent")
    clock = Clock(time.time())
    resolver = FakeResolver({"blocked.test": ["127.0.0.2"]})
    app = create_app(cfg, clock=clock, resolver=resolver)
    client = await aiohttp_client(app)
    return Env(
        client, f"http://127.0.0.1:{site.port}", key, clock, app, site_app, state_dir / "sift.db"
    )


# -- scenarios: one request each; (path, method, status) is what the server must answer -------

Drive = Callable[[Env], Awaitable[object]]
SCENARIOS: dict[str, tuple[str, str, int, Drive]] = {}


def scenario(name: str, path: str, method: str, status: int):
    def register(fn: Drive) -> Drive:
        SCENARIOS[name] = (path, method, status, fn)
        return fn

    return register


@scenario("healthz", "/healthz", "get", 200)
async def _(env):
    return await env.client.get("/healthz")


@scenario("metrics", "/metrics", "get", 200)
async def _(env):
    return await env.client.get("/metrics")


@scenario("openapi", "/v1/openapi.json", "get", 200)
async def _(env):
    return await env.client.get("/v1/openapi.json")


@scenario("fetch-clean", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/article/1")})


@scenario("fetch-question-context", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/article/2"), "question": "What will it cost?"})


@scenario("fetch-grep-matches", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/plain.txt"), "grep": "needle"})


@scenario("fetch-grep-no-match-note", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/plain.txt"), "grep": "no-such-line"})


@scenario("fetch-jq", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/data.json"), "jq": ".items[].name"})


@scenario("fetch-pdf-pages", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/report.pdf"), "pages": "1"})


@scenario("fetch-truncated-hint", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/big?words=3000"), "mode": "text"})


@scenario("fetch-recover-archived-at", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/status/500"), "recover": True})


@scenario("fetch-all-nulls", "/v1/fetch", "post", 200)
async def _(env):
    nulls = dict.fromkeys(("mode", "question", "pages", "grep", "jq", "context", "recover"))
    return await env.fetch({"url": env.url("/article/3"), **nulls})


@scenario("fetch-malformed", "/v1/fetch", "post", 400)
async def _(env):
    return await env.client.post("/v1/fetch", data=b"{nope", headers=env.auth)


@scenario("fetch-bad-grep", "/v1/fetch", "post", 400)
async def _(env):
    return await env.fetch({"url": env.url("/plain.txt"), "grep": "(unclosed"})


@scenario("fetch-no-key", "/v1/fetch", "post", 401)
async def _(env):
    return await env.client.post("/v1/fetch", json={"url": env.url("/article/1")})


@scenario("fetch-blocked-at-connect", "/v1/fetch", "post", 403)
async def _(env):
    port = env.base.rsplit(":", 1)[1]
    return await env.fetch({"url": f"http://blocked.test:{port}/"})


@scenario("fetch-body-too-large", "/v1/fetch", "post", 413)
async def _(env):
    return await env.client.post(
        "/v1/fetch", data=b"{" + b" " * (65 * 1024) + b"}", headers=env.auth
    )


@scenario("fetch-upstream-too-long", "/v1/fetch", "post", 413)
async def _(env):
    return await env.fetch({"url": env.url("/bomb")})


@scenario("fetch-unsupported", "/v1/fetch", "post", 415)
async def _(env):
    return await env.fetch({"url": env.url("/image.png")})


@scenario("fetch-refused", "/v1/fetch", "post", 422)
async def _(env):
    return await env.fetch({"url": "ftp://127.0.0.1/x"})


@scenario("fetch-gates-full", "/v1/fetch", "post", 429)
async def _(env):
    slow = asyncio.create_task(env.fetch({"url": env.url("/slow?s=0.5")}))
    hits = env.site[HITS]
    while not any(h.startswith("/slow") for h in hits):
        await asyncio.sleep(0.01)
    try:
        return await env.fetch({"url": env.url("/article/4")})
    finally:
        (await slow).release()


@scenario("fetch-upstream-4xx", "/v1/fetch", "post", 502)
async def _(env):
    return await env.fetch({"url": env.url("/status/404")})


@scenario("fetch-bot-wall", "/v1/fetch", "post", 502)
async def _(env):
    return await env.fetch({"url": env.url("/botwall")})


@scenario("fetch-script-only-page-verdict", "/v1/fetch", "post", 502)
async def _(env):
    return await env.fetch({"url": env.url("/app")})


@scenario("fetch-accept-verdicts", "/v1/fetch", "post", 200)
async def _(env):
    return await env.fetch({"url": env.url("/app"), "accept_verdicts": ["bot_wall", "soft_404"]})


@scenario("fetch-while-the-database-is-locked", "/v1/fetch", "post", 200)
async def _(env):
    with env.write_locked():
        return await env.fetch({"url": env.url("/article/5")})


@scenario("fetch-timeout", "/v1/fetch", "post", 504)
async def _(env):
    return await env.fetch({"url": env.url("/slow?s=3")})


@scenario("submit", "/v1/batch", "post", 202)
async def _(env):
    return await env.submit(["/article/1", "/article/2"])


@scenario("submit-reused", "/v1/batch", "post", 202)
async def _(env):
    await env.job(["/article/1"])
    return await env.submit(["/article/1"])


@scenario("submit-malformed-target", "/v1/batch", "post", 400)
async def _(env):
    body = {"targets": [{"url": env.url("/a")}, {"url": 5}]}
    return await env.client.post("/v1/batch", json=body, headers=env.auth)


@scenario("submit-empty", "/v1/batch", "post", 400)
async def _(env):
    return await env.client.post("/v1/batch", json={"targets": []}, headers=env.auth)


@scenario("submit-no-key", "/v1/batch", "post", 401)
async def _(env):
    return await env.client.post("/v1/batch", json={"targets": [{"url": env.url("/a")}]})


@scenario("submit-body-too-large", "/v1/batch", "post", 413)
async def _(env):
    body = {"targets": [{"url": env.url("/a"), "question": "q" * 4000}] * 70}
    return await env.client.post("/v1/batch", json=body, headers=env.auth)


@scenario("submit-unsupported-encoding", "/v1/batch", "post", 415)
async def _(env):
    headers = {**env.auth, "Content-Encoding": "br", "Content-Type": "application/json"}
    return await env.client.post("/v1/batch", data=b"{}", headers=headers)


@scenario("fetch-unsupported-encoding", "/v1/fetch", "post", 415)
async def _(env):
    headers = {**env.auth, "Content-Encoding": "zstd", "Content-Type": "application/json"}
    return await env.client.post("/v1/fetch", data=b"{}", headers=headers)


@scenario("submit-refused-target", "/v1/batch", "post", 422)
async def _(env):
    body = {"targets": [{"url": env.url("/a")}, {"url": "http://10.0.0.1/"}]}
    return await env.client.post("/v1/batch", json=body, headers=env.auth)


@scenario("submit-too-many", "/v1/batch", "post", 422)
async def _(env):
    return await env.submit([f"/article/{i}" for i in range(4)])


@scenario("submit-caller-busy", "/v1/batch", "post", 429)
async def _(env):
    await env.job(["/article/1"])
    return await env.submit(["/article/2"])


@scenario("submit-store-busy", "/v1/batch", "post", 503)
async def _(env):
    with env.write_locked():
        return await env.submit(["/article/1"])


@scenario("status-pending", "/v1/batch/{job_id}", "get", 200)
async def _(env):
    job_id = await env.job(["/article/1", "/article/2"])
    return await env.client.get(f"/v1/batch/{job_id}", headers=env.auth)


@scenario("status-partial-inline-results", "/v1/batch/{job_id}", "get", 200)
async def _(env):
    job_id = await env.drained_job(["/article/1", "/status/404", "/plain.txt"])
    return await env.client.get(f"/v1/batch/{job_id}", headers=env.auth)


@scenario("status-results-false", "/v1/batch/{job_id}", "get", 200)
async def _(env):
    job_id = await env.drained_job(["/article/1"])
    return await env.client.get(f"/v1/batch/{job_id}?results=false&wait=0", headers=env.auth)


@scenario("status-bad-wait", "/v1/batch/{job_id}", "get", 400)
async def _(env):
    job_id = await env.job(["/article/1"])
    return await env.client.get(f"/v1/batch/{job_id}?wait=61", headers=env.auth)


@scenario("status-bad-results", "/v1/batch/{job_id}", "get", 400)
async def _(env):
    job_id = await env.job(["/article/1"])
    return await env.client.get(f"/v1/batch/{job_id}?results=maybe", headers=env.auth)


@scenario("status-no-key", "/v1/batch/{job_id}", "get", 401)
async def _(env):
    return await env.client.get("/v1/batch/0123")


@scenario("status-unknown", "/v1/batch/{job_id}", "get", 404)
async def _(env):
    return await env.client.get("/v1/batch/0123", headers=env.auth)


@scenario("status-while-the-database-is-locked", "/v1/batch/{job_id}", "get", 200)
async def _(env):
    job_id = await env.job(["/article/1"])
    env.clock.now += 5  # the owner's read slides the lease: a write
    with env.write_locked():
        return await env.client.get(f"/v1/batch/{job_id}", headers=env.auth)


@scenario("events-drained-job", "/v1/batch/{job_id}/events", "get", 200)
async def _(env):
    job_id = await env.drained_job(["/article/1", "/status/404", "/plain.txt"])
    return await env.client.get(f"/v1/batch/{job_id}/events?results=true", headers=env.auth)


@scenario("events-bad-last-event-id", "/v1/batch/{job_id}/events", "get", 400)
async def _(env):
    job_id = await env.job(["/article/1"])
    headers = {**env.auth, "Last-Event-ID": "seven"}
    return await env.client.get(f"/v1/batch/{job_id}/events", headers=headers)


@scenario("events-no-key", "/v1/batch/{job_id}/events", "get", 401)
async def _(env):
    return await env.client.get("/v1/batch/0123/events")


@scenario("events-unknown", "/v1/batch/{job_id}/events", "get", 404)
async def _(env):
    return await env.client.get("/v1/batch/0123/events", headers=env.auth)


@scenario("events-results-past-the-callers-reads", "/v1/batch/{job_id}/events", "get", 429)
async def _(env):
    job_id = await env.job(["/article/1"])
    reads, caller = env.app[READS], Caller("agent")
    job = await reads.job(job_id, caller)
    async with contextlib.AsyncExitStack() as held:  # the caller's reads with results in flight
        for _ in range(env.app[CONFIG].server.status_reads):
            await held.enter_async_context(reads.admitted(caller, job, True))
        return await env.client.get(f"/v1/batch/{job_id}/events?results=true", headers=env.auth)


async def _hooked_job(env) -> str:
    body = {"targets": [{"url": env.url("/article/1")}], "webhook": env.url("/hook")}
    resp = await env.client.post("/v1/batch", json=body, headers=env.auth)
    assert resp.status == 202, await resp.text()
    return (await resp.json())["job_id"]


@scenario("submit-webhook-private-address", "/v1/batch", "post", 422)
async def _(env):
    body = {"targets": [{"url": env.url("/article/1")}], "webhook": "http://10.0.0.1/hook"}
    return await env.client.post("/v1/batch", json=body, headers=env.auth)


@scenario("redeliver", "/v1/batch/{job_id}/webhook/redeliver", "post", 202)
async def _(env):
    job_id = await _hooked_job(env)
    return await env.client.post(f"/v1/batch/{job_id}/webhook/redeliver", headers=env.auth)


@scenario("redeliver-no-key", "/v1/batch/{job_id}/webhook/redeliver", "post", 401)
async def _(env):
    return await env.client.post("/v1/batch/0123/webhook/redeliver")


@scenario("redeliver-unknown", "/v1/batch/{job_id}/webhook/redeliver", "post", 404)
async def _(env):
    return await env.client.post("/v1/batch/0123/webhook/redeliver", headers=env.auth)


@scenario("redeliver-no-webhook", "/v1/batch/{job_id}/webhook/redeliver", "post", 409)
async def _(env):
    job_id = await env.job(["/article/1"])
    return await env.client.post(f"/v1/batch/{job_id}/webhook/redeliver", headers=env.auth)


@scenario("redeliver-store-busy", "/v1/batch/{job_id}/webhook/redeliver", "post", 503)
async def _(env):
    job_id = await _hooked_job(env)
    with env.write_locked():
        return await env.client.post(f"/v1/batch/{job_id}/webhook/redeliver", headers=env.auth)


@scenario("cancel", "/v1/batch/{job_id}", "delete", 200)
async def _(env):
    job_id = await env.job(["/article/1"])
    return await env.client.delete(f"/v1/batch/{job_id}", headers=env.auth)


@scenario("cancel-no-key", "/v1/batch/{job_id}", "delete", 401)
async def _(env):
    return await env.client.delete("/v1/batch/0123")


@scenario("cancel-unknown", "/v1/batch/{job_id}", "delete", 404)
async def _(env):
    return await env.client.delete("/v1/batch/0123", headers=env.auth)


@scenario("cancel-finished", "/v1/batch/{job_id}", "delete", 409)
async def _(env):
    job_id = await env.drained_job(["/article/1"])
    return await env.client.delete(f"/v1/batch/{job_id}", headers=env.auth)


@scenario("submit-bare-list-of-urls", "/v1/batch", "post", 202)
async def _(env):
    return await env.client.post("/v1/batch", json=[env.url("/article/3")], headers=env.auth)


@scenario("submit-fresh", "/v1/batch", "post", 202)
async def _(env):
    await env.drained_job(["/article/1"])
    body = {"targets": [env.url("/article/1")], "fresh": True}
    return await env.client.post("/v1/batch", json=body, headers=env.auth)


@scenario("list", "/v1/batch", "get", 200)
async def _(env):
    await env.drained_job(["/article/1", "/status/404"])
    await env.job(["/article/2"])
    return await env.client.get("/v1/batch?limit=1", headers=env.auth)


@scenario("list-bad-limit", "/v1/batch", "get", 400)
async def _(env):
    return await env.client.get("/v1/batch?limit=101", headers=env.auth)


@scenario("list-no-key", "/v1/batch", "get", 401)
async def _(env):
    return await env.client.get("/v1/batch")


async def _retry(env, body=None):
    job_id = await env.drained_job(["/article/1", "/status/404"])
    return await env.client.post(f"/v1/batch/{job_id}/retry", json=body, headers=env.auth)


@scenario("retry", "/v1/batch/{job_id}/retry", "post", 202)
async def _(env):
    return await _retry(env)


@scenario("retry-bad-body", "/v1/batch/{job_id}/retry", "post", 400)
async def _(env):
    return await _retry(env, {"only_retryable": "yes"})


@scenario("retry-no-key", "/v1/batch/{job_id}/retry", "post", 401)
async def _(env):
    return await env.client.post("/v1/batch/0123/retry")


@scenario("retry-unknown", "/v1/batch/{job_id}/retry", "post", 404)
async def _(env):
    return await env.client.post("/v1/batch/0123/retry", headers=env.auth)


@scenario("retry-live", "/v1/batch/{job_id}/retry", "post", 409)
async def _(env):
    job_id = await env.job(["/article/1"])
    return await env.client.post(f"/v1/batch/{job_id}/retry", headers=env.auth)


@scenario("retry-nothing-retryable", "/v1/batch/{job_id}/retry", "post", 422)
async def _(env):
    return await _retry(env, {"only_retryable": True})


@scenario("retry-caller-busy", "/v1/batch/{job_id}/retry", "post", 429)
async def _(env):
    job_id = await env.drained_job(["/article/1", "/status/404"])
    await env.job(["/article/2"])
    return await env.client.post(f"/v1/batch/{job_id}/retry", headers=env.auth)


@scenario("retry-store-busy", "/v1/batch/{job_id}/retry", "post", 503)
async def _(env):
    job_id = await env.drained_job(["/article/1", "/status/404"])
    with env.write_locked():
        return await env.client.post(f"/v1/batch/{job_id}/retry", headers=env.auth)


@scenario("cancel-store-busy", "/v1/batch/{job_id}", "delete", 503)
async def _(env):
    job_id = await env.job(["/article/1"])
    with env.write_locked():
        return await env.client.delete(f"/v1/batch/{job_id}", headers=env.auth)


async def _rate_spent(env, method: str, path: str):
    """The key's request burst spent (the env's clock stands still: no token comes back), then
    one more request (docs/GATES.md §Request rate per key)."""
    for _ in range(env.app[CONFIG].gates.request_burst):
        (await env.client.get("/v1/batch", headers=env.auth)).release()
    return await env.client.request(method, path, headers=env.auth)


@scenario("list-rate-limited", "/v1/batch", "get", 429)
async def _(env):
    return await _rate_spent(env, "GET", "/v1/batch")


@scenario("status-rate-limited", "/v1/batch/{job_id}", "get", 429)
async def _(env):
    return await _rate_spent(env, "GET", "/v1/batch/0123")


@scenario("cancel-rate-limited", "/v1/batch/{job_id}", "delete", 429)
async def _(env):
    return await _rate_spent(env, "DELETE", "/v1/batch/0123")


@scenario("redeliver-rate-limited", "/v1/batch/{job_id}/webhook/redeliver", "post", 429)
async def _(env):
    return await _rate_spent(env, "POST", "/v1/batch/0123/webhook/redeliver")


# -- the tests -----------------------------------------------------------------------------


def test_the_document_is_a_valid_openapi_3_1_document():
    assert DOC["openapi"].startswith("3.1")
    validate_spec(DOC)


async def test_the_server_serves_its_document_without_a_key(env):
    resp = await env.client.get("/v1/openapi.json")
    assert resp.status == 200 and resp.content_type == "application/json"
    assert await resp.json() == DOC


async def test_every_registered_route_is_documented_with_its_method(env):
    registered = {
        (route.resource.canonical, route.method.lower())
        for route in env.app.router.routes()
        if route.method != "HEAD"  # aiohttp adds HEAD to every GET; the document says so
    }
    ops = {
        (path, method)
        for path, item in DOC["paths"].items()
        for method in item
        if method in METHODS
    }
    assert registered == ops
    heads = {r.resource.canonical for r in env.app.router.routes() if r.method == "HEAD"}
    gets = {path for path, method in registered if method == "get"}
    assert heads <= gets


def test_every_documented_status_has_a_scenario_that_produces_it():
    driven = {(path, method, status) for path, method, status, _ in SCENARIOS.values()}
    assert documented() - NOT_DRIVEN == driven


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_every_answer_is_documented_and_matches_its_schema(env, name):
    path, method, status, drive = SCENARIOS[name]
    resp = await drive(env)
    body = await resp.read()
    assert resp.status == status, body[:500]
    if path == "/metrics":
        assert resp.content_type == "text/plain"
        assert b"sift_batch_jobs_total" in body
        return
    if path.endswith("/events") and status == 200:
        assert resp.content_type == "text/event-stream"
        assert_event_frames(body)
        return
    assert resp.content_type == "application/json", resp.content_type
    validator = response_validator(path, method, status, "application/json")
    answer = json.loads(body)
    errors = sorted(validator.iter_errors(answer), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    for key, value in _times(answer):  # `format: date-time`, checked without an extra package
        assert RFC3339_UTC.match(value), (key, value)
    if status in (429, 503):
        assert resp.headers["Retry-After"]
    if status == 401:
        assert resp.headers["WWW-Authenticate"] == "Bearer"


def assert_event_frames(body: bytes) -> None:
    """Every frame's `data` is a documented `Event`, its `id` the event id, in order."""
    media = DOC["paths"]["/v1/batch/{job_id}/events"]["get"]["responses"]["200"]["content"]
    ref = media["text/event-stream"]["schema"]["properties"]["data"]["contentSchema"]["$ref"]
    validator = Draft202012Validator(
        {"$ref": DOC_URI + ref}, registry=REGISTRY, format_checker=FormatChecker()
    )
    frames = [f for f in body.decode().split("\n\n") if f.strip()]
    kinds = []
    for n, frame in enumerate(frames, start=1):
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        event = json.loads(fields["data"])
        errors = sorted(validator.iter_errors(event), key=str)
        assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
        assert int(fields["id"]) == event["data"]["event_id"] == n
        assert fields["event"] == event["type"]
        kinds.append(event["type"])
    assert kinds == ["job.running", "target.done", "target.failed", "target.done", "job.partial"]


async def test_the_batch_status_shows_every_target_entry_shape(env):
    job_id = await env.drained_job(["/article/1", "/status/404", "/plain.txt"])
    resp = await env.client.get(f"/v1/batch/{job_id}", headers=env.auth)
    targets = (await resp.json())["targets"]
    assert [t["status"] for t in targets] == ["done", "failed", "done"]
    assert "result" in targets[0] and targets[1]["hint"] == "recover"
    assert (
        response_validator("/v1/batch/{job_id}", "get", 200, "application/json").is_valid(
            {
                **(await resp.json()),
                "targets": [*targets, {"idx": 3, "url": "u", "status": "bogus"}],
            }
        )
        is False
    )


async def test_optional_success_fields_are_all_seen_by_the_scenarios(env):
    """The scenarios above exercise every optional field of the success envelope."""
    seen: set[str] = set()
    for name in sorted(SCENARIOS):
        path, _, status, drive = SCENARIOS[name]
        if (path, status) == ("/v1/fetch", 200):
            resp = await drive(env)
            seen |= set(await resp.json())
    props = DOC["components"]["schemas"]["FetchResult"]["properties"]
    assert seen == set(props)


async def test_unknown_routes_and_wrong_methods_answer_json_not_html(env):
    resp = await env.client.get("/v1/nothing", headers=env.auth)
    assert resp.status == 404 and await resp.json() == {"success": False, "error": "no such route"}
    resp = await env.client.put("/v1/fetch", headers=env.auth)
    assert resp.status == 405 and resp.content_type == "application/json"
    assert (await resp.json())["success"] is False
    assert resp.headers["Allow"] == "POST"


def test_the_target_schema_matches_the_fields_the_server_validates():
    schema = DOC["components"]["schemas"]["Target"]
    props = schema["properties"]
    assert set(props) == set(target._FIELDS) and schema["required"] == ["url"]
    assert props["mode"]["enum"] == [*target.MODES, None]
    assert props["url"]["maxLength"] == target.MAX_URL
    for name in ("question", "pages", "grep", "jq"):
        assert props[name]["maxLength"] == target.MAX_TEXT_FIELD
    assert (props["max_age"]["minimum"], props["max_age"]["maximum"]) == (0, target.MAX_AGE_MAX)


def test_the_document_carries_the_installed_version():
    """CHANGELOG.md: `sift --version` and the document's info.version move together."""
    assert DOC["info"]["version"] == about.version() != about.UNKNOWN


def test_the_documented_enums_and_limits_match_the_code():
    schemas = DOC["components"]["schemas"]
    assert schemas["BatchStatus"]["properties"]["status"]["enum"] == [str(s) for s in JobStatus]
    wait = DOC["paths"]["/v1/batch/{job_id}"]["get"]["parameters"][0]
    assert wait["name"] == "wait" and wait["schema"]["maximum"] == WAIT_MAX

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    hints = {c.hint for c in subclasses(SiftError) if c.hint}
    assert hints <= set(schemas["Hint"]["enum"])


def test_the_api_reference_lists_every_route_and_status_of_the_document():
    text = (Path(__file__).parents[2] / "docs" / "API.md").read_text()
    table = text.split("## Routes", 1)[1].split("\n\n", 2)[1]
    listed = set()
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        method, path = cells[0].strip("`").lower(), cells[1].strip("`")
        listed |= {(path, method, int(s)) for s in re.findall(r"`(\d{3})`", cells[3])}
    assert listed == documented()
