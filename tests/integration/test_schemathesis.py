"""A bounded schemathesis run against the real API served on loopback.

Every operation of the OpenAPI document gets generated requests (examples, coverage and
fuzzing phases, positive and negative data); each answer must be no 5xx, a documented status,
the documented content type and a body that matches the documented schema.

Nothing leaves loopback. Before each call every generated target URL is checked with the
server's own pre-check: a URL it refuses stays as generated (the server refuses it before any
lookup or connect), any other one is rewritten to a page of the loopback test site or to a name
the canned resolver cannot answer. The resolver answers no name, only the site's port is
allowed, and the process-wide connect tripwire (tests/conftest.py) turns any other connect into
a 500, which fails the run.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from sift import config
from sift.api.app import create_app
from sift.api.appkeys import PIPELINE, STORE
from sift.api.openapi_routes import document
from sift.auth import add_key
from sift.errors import SiftError
from sift.guard import Policy, precheck
from tests.site import FakeResolver, make_site

MAX_EXAMPLES = 100  # per operation and phase; keeps the whole run well under a minute
# docs/API.md §Failure table: the target failed upstream, not the server
UPSTREAM_FAILURES = (502, 504)


def not_a_server_error(ctx, response, case) -> None:
    """No 5xx of the server's own: 502 and 504 report the target's upstream, so they pass."""
    code = response.status_code
    if code >= 500 and code not in UPSTREAM_FAILURES:
        raise AssertionError(f"server error {code}: {response.text[:300]}")


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    unsupported_method,
]
SITE_PATHS = (
    "/article/1",
    "/article/2",
    "/data.json",
    "/plain.txt",
    "/redirect?to=/article/3",
    "/to-blocked",
    "/loop/0",
    "/status/404",
    "/status/503",
    "/botwall",
    "/image.png",
    "/gz",
    "/nothing-here",
)
HELD_WAIT = 0.2  # the longest ?wait= sent for a live job


def loopback_session() -> requests.Session:
    """A session that ignores proxy variables, so loopback traffic never goes via a proxy."""
    session = requests.Session()
    session.trust_env = False
    return session


class LoopbackServers:
    """The test site and the API on 127.0.0.1, served from one background event loop."""

    def __init__(self, state_dir):
        self.state_dir = state_dir
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runners: list[web.AppRunner] = []

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)

    async def _serve(self, app: web.Application) -> int:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.runners.append(runner)
        return runner.addresses[0][1]

    async def _start(self) -> None:
        self.site_port = await self._serve(make_site())
        self.cfg = config.from_dict(
            {
                "store": {"state_dir": str(self.state_dir)},
                "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [self.site_port]},
                "recover": {"archive_url": f"http://127.0.0.1:{self.site_port}"},
                "fetch": {"timeout": 2, "max_body": 1024 * 1024, "output_cap": 5000},
                "batch": {"jobs_per_caller": 100_000, "jobs_total": 100_000},
                "gates": {"requests_per_second": 0},  # fuzzing outruns the per-key request rate
            }
        )
        self.key = add_key(self.cfg.keys_file, "fuzzer")
        self.app = create_app(self.cfg, resolver=FakeResolver({}))
        self.port = await self._serve(self.app)

    def run(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        async def cleanup():
            for runner in reversed(self.runners):
                await runner.cleanup()

        self.run(cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Target:
    """What generated requests are steered to."""

    base_url: str
    key: str
    session: requests.Session
    site_port: int
    policy: Policy
    live_job: str
    finished_job: str

    def safe_url(self, raw: Any) -> Any:
        """A loopback site page, an unresolvable name, or `raw` when the pre-check refuses it.

        Refused URLs are kept for a third of the cases (the server refuses them before any
        lookup), so most requests reach the fetch pipeline.
        """
        if not isinstance(raw, str):
            return raw
        h = zlib.crc32(raw.encode("utf-8", "surrogatepass"))
        site = f"http://127.0.0.1:{self.site_port}{SITE_PATHS[h % len(SITE_PATHS)]}"
        try:
            parsed = precheck(raw, self.policy)
        except SiftError:
            return raw if h % 3 == 0 else site
        if parsed.raw_host and not parsed.raw_host[0].isdigit() and h % 4 == 0:
            return f"http://name-{h}.invalid:{self.site_port}/"
        return site

    def steer(self, case) -> None:
        body = case.body
        if isinstance(body, dict):
            if "url" in body:
                body["url"] = self.safe_url(body["url"])
            targets = body.get("targets")
            if isinstance(targets, list):
                for t in targets:
                    if isinstance(t, dict) and "url" in t:
                        t["url"] = self.safe_url(t["url"])
        params = case.path_parameters or {}
        if "job_id" in params:
            h = zlib.crc32(str(params["job_id"]).encode("utf-8", "surrogatepass")) % 3
            if h == 0:
                params["job_id"] = self.live_job
                wait = (case.query or {}).get("wait")
                if isinstance(wait, int | float) and not isinstance(wait, bool) and wait > 0:
                    case.query["wait"] = min(wait, HELD_WAIT)
            elif h == 1:
                params["job_id"] = self.finished_job
            if case.path.endswith("/events") and params["job_id"] == self.live_job:
                params["job_id"] = self.finished_job  # a live job's stream lasts until it ends


def _finished_job(servers: LoopbackServers, session, base: str, headers: dict) -> str:
    """A job whose one target is stored done, with a real fetch result."""
    url = f"http://127.0.0.1:{servers.site_port}/article/9"
    result = session.post(f"{base}/v1/fetch", json={"url": url}, headers=headers, timeout=30)
    assert result.status_code == 200, result.text
    job = session.post(
        f"{base}/v1/batch", json={"targets": [{"url": url}]}, headers=headers, timeout=30
    ).json()["job_id"]
    store = servers.app[STORE]

    async def finish():
        now = time.time()
        claim = await store.batch.claim(job, now)
        assert claim is not None
        await store.batch.finish(
            job, 0, status="done", outcome="ok", seconds=0.1, now=now, result=result.text
        )

    servers.run(finish())
    return job


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    state_dir = tmp_path_factory.mktemp("st") / "s"
    state_dir.mkdir()
    servers = LoopbackServers(state_dir)
    servers.start()
    session = loopback_session()
    try:
        base = f"http://127.0.0.1:{servers.port}"
        headers = {"Authorization": f"Bearer {servers.key}"}
        live = session.post(
            f"{base}/v1/batch",
            json={"targets": [{"url": f"http://127.0.0.1:{servers.site_port}/article/8"}]},
            headers=headers,
            timeout=30,
        ).json()["job_id"]
        yield Target(
            base_url=base,
            key=servers.key,
            session=session,
            site_port=servers.site_port,
            policy=servers.app[PIPELINE].policy,
            live_job=live,
            finished_job=_finished_job(servers, session, base, headers),
        )
    finally:
        session.close()
        servers.stop()


# Generation needs no server; the calls go to the one the `target` fixture starts.
schema = schemathesis.openapi.from_dict(
    json.loads(document()),
    config=schemathesis.Config.from_dict({"generation": {"max-examples": MAX_EXAMPLES}}),
)


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_generated_requests_get_documented_answers_and_never_a_5xx(case, target):
    target.steer(case)
    case.call_and_validate(
        base_url=target.base_url,
        session=target.session,
        headers={"Authorization": f"Bearer {target.key}"},
        checks=CHECKS,
        timeout=30,
    )


def test_generated_urls_are_steered_to_loopback_or_refused(target):
    """The steering itself: every URL the server would try to fetch is on loopback."""
    cases = [
        "http://93.184.216.34/",
        f"http://93.184.216.34:{target.site_port}/",
        "https://example.com/",
        f"http://example.com:{target.site_port}/x",
        "ftp://example.com/",
        "http://10.0.0.1/",
        " \t",
        "http://[2001:db8::1]/",
    ]
    for raw in cases:
        out = target.safe_url(raw)
        try:
            parsed = precheck(out, target.policy)
        except SiftError:
            continue
        assert parsed.raw_host == "127.0.0.1" or parsed.raw_host.endswith(".invalid"), out
    assert orjson.dumps(target.safe_url(5)) == b"5"
