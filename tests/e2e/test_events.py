"""Both result channels end to end with the real processes, on both engines (docs/API.md
§Events, §Webhooks): `sift serve` and `sift-worker` fetch real pages from the loopback test
site; `sift batch events` follows the job over SSE; a receiver on loopback verifies every
webhook delivery with the `standardwebhooks` library."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks.webhooks import Webhook

from sift.cli import exits
from sift.signing import rotate_secret
from tests.e2e.procs import SiftProcs, cli, wait_until


class Receiver:
    """A loopback webhook receiver; `secret` must be set before deliveries arrive."""

    def __init__(self):
        self.secret = ""
        self.got: list[tuple[str, dict]] = []
        self.refused = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    payload = Webhook(receiver.secret).verify(body, dict(self.headers))
                except Exception:
                    receiver.refused += 1
                    self.send_response(401)
                else:
                    receiver.got.append((self.headers["webhook-id"], payload))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=["sqlite", "postgres"])
def env(request, site):
    store = {}
    if request.param == "postgres":
        store = {"engine": "postgres", "dsn": request.getfixturevalue("pg_dsn")}
    receiver = Receiver()
    procs = SiftProcs([site.port, site.blocked_port, receiver.port], store=store)
    receiver.secret = rotate_secret(procs.state_dir / "keys.toml", "alice")
    try:
        with procs:
            yield procs, receiver
    finally:
        receiver.close()


def test_a_job_is_followed_over_sse_and_told_by_signed_webhooks(env, site, tag):
    procs, receiver = env
    urls = [site.url(f"/article/1?{tag}"), site.url(f"/status/404?{tag}"), site.url("/plain.txt")]
    body = {
        "targets": [{"url": u} for u in urls],
        "webhook": {"url": f"http://127.0.0.1:{receiver.port}/", "events": ["*"]},
    }
    status, answer = procs.call("POST", "/v1/batch", body)
    assert status == 202, answer
    job = answer["job_id"]
    followed = cli(procs, "batch", "events", job)
    assert followed.returncode == exits.PARTIAL, followed.stderr
    events = [json.loads(line) for line in followed.stdout.splitlines()]
    kinds = ["job.running", "target.done", "target.failed", "target.done", "job.partial"]
    assert [e["type"] for e in events] == kinds
    assert [e["data"]["event_id"] for e in events] == [1, 2, 3, 4, 5]
    assert events[2]["data"]["url"] == urls[1] and events[2]["data"]["hint"] == "recover"
    wait_until(lambda: len(receiver.got) == 5, what="five verified deliveries")
    assert receiver.refused == 0
    assert sorted(i for i, _ in receiver.got) == [f"msg_{job}_{n}" for n in range(1, 6)]
    by_id = {i: p for i, p in receiver.got}
    assert [by_id[f"msg_{job}_{n}"]["type"] for n in range(1, 6)] == kinds
    wait_until(
        lambda: procs.job(job).get("webhook", {}).get("state") == "delivered",
        what="the status showing every delivery made",
    )
    assert 'sift_webhook_deliveries_total{outcome="delivered"} 5.0' in procs.metrics_text()
