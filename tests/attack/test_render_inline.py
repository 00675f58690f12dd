"""A small page is not a cheap one: every render runs in a render child, whatever its size
(docs/SECURITY.md §Rendering runs in render children).

Real processes and a loopback site: a 13.8 KB table of cells spanning 65,534 rows and 1,000
columns (`tests/bombs.table_spans`) costs trafilatura a minute of CPU. Rendered on the event
loop, it froze the API (and, as a batch target, the worker's heartbeat) for that minute; in a
render child it fails its own target at `[render] timeout` while other callers go on.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.bombs import table_spans
from tests.e2e.conftest import fresh, site, tag
from tests.e2e.procs import http, wait_for_job_status
from tests.robustness.helpers import configure

__all__ = ["fresh", "site", "tag"]

pytestmark = pytest.mark.e2e

RENDER_TIMEOUT = 3.0
MARGIN = 3.0  # seconds beyond the render budget for the download, the reply, a loaded machine
FAST = 1.0  # seconds another caller's request may take while the table renders


@pytest.fixture
def pair(fresh):
    procs = fresh(start=False)
    configure(procs, render={"timeout": f"{RENDER_TIMEOUT:g}s"})
    return procs.start()


def test_the_table_page_is_small():
    assert len(table_spans()) < 16 * 1024


def during(call) -> tuple[threading.Thread, dict]:
    """`call()` on a thread, its answer and duration kept in the returned dict."""
    out: dict = {}

    def run() -> None:
        started = time.monotonic()
        out["answer"] = call()
        out["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_small_page_that_is_costly_to_render_fails_at_the_render_limit_and_others_go_on(
    pair, site, tag
):
    table = site.url(f"/hostile/table.html?t={tag}")
    thread, slow = during(lambda: pair.call("POST", "/v1/fetch", {"url": table}, timeout=120))
    time.sleep(0.5)  # the table is being rendered
    health, small = [], []
    while thread.is_alive():
        started = time.monotonic()
        status, _ = http("GET", pair.base + "/healthz", timeout=30)
        health.append((status, time.monotonic() - started))
        started = time.monotonic()
        status, body = pair.call("POST", "/v1/fetch", {"url": site.url("/plain.txt")}, who="bob")
        small.append((status, time.monotonic() - started))
        time.sleep(0.1)
    thread.join()
    status, body = slow["answer"]
    assert status == 504, body
    assert "[render] timeout" in body["error"]
    assert slow["seconds"] < RENDER_TIMEOUT + MARGIN
    assert health and all(s == 200 and t < FAST for s, t in health), health
    assert small and all(s == 200 and t < FAST for s, t in small), small


def test_a_small_costly_page_in_a_batch_never_stalls_the_worker_heartbeat(pair, site, tag):
    urls = [site.url(f"/hostile/table.html?t={tag}&n={n}") for n in range(2)]
    status, job = pair.submit(urls)
    assert status == 202, job
    ages = []
    deadline = time.monotonic() + 2 * (RENDER_TIMEOUT + MARGIN) + 10
    while time.monotonic() < deadline:
        health = pair.health()
        assert health is not None
        ages.append(health["worker"]["heartbeat_age"])
        if pair.job(job["job_id"], query="?results=false")["status"] not in ("queued", "running"):
            break
        time.sleep(0.2)
    done = wait_for_job_status(pair, job["job_id"], timeout=30)
    assert all(t["status"] == "failed" for t in done["targets"]), done
    assert all("[render] timeout" in t["error"] for t in done["targets"]), done
    assert max(ages) < 2 * 2.0 + 1.0, ages  # two heartbeat periods, plus a loaded machine
