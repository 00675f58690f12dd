"""A status reply is bounded whatever its job's results, and one caller's unread replies never
hold back another caller's status reads (docs/SECURITY.md §Status reads, docs/API.md
§GET /v1/batch/{job_id}). Real API and worker processes over loopback.

Bounds held: a reply with results under `[server] status_page` plus one result
(`REPLY_MAX`); another caller's read answered 200 within `OTHER_CALLER_MAX` seconds while
four replies of the job are left unread; the API's peak RSS under `API_RSS_MAX`.
"""

from __future__ import annotations

import socket
import time

import orjson
import pytest

from sift.client.sync import Client
from tests.attack.caps_site import HostileSite
from tests.bombs import canonical_page
from tests.e2e.procs import SiftProcs, http, wait_for_job_status
from tests.robustness.helpers import configure, proc_memory

pytestmark = pytest.mark.e2e

TARGETS = 32
PAGE = 256 * 1024
ONE_RESULT = 400 * 1024  # a 100 000-character result (3 bytes a character) and its envelope
REPLY_MAX = PAGE + ONE_RESULT + 64 * 1024  # plus the targets' statuses
OTHER_CALLER_MAX = 2.0  # seconds (a loaded machine: the read itself takes milliseconds)
API_RSS_MAX = 200 * 1024 * 1024


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    for i in range(4):
        site.add(f"/canonical/{i}", canonical_page(i))
    for i in range(TARGETS - 4):
        # 3 bytes a character: 28 results of 100 000 characters are 9 MB
        site.add(f"/text/{i}", f"text {i} " + "€€€ " * 30_000, "text/plain")
    yield site
    site.close()


def sift_with(hostile, page: str):
    procs = SiftProcs([hostile.port], batch={"targets_per_job": TARGETS, "max_bytes": "256MiB"})
    configure(procs, server={"status_page": page, "status_bytes": "1MiB", "send_timeout": "6s"})
    return procs


def submit_big_job(api, hostile) -> str:
    urls = [hostile.url(f"/canonical/{i}") for i in range(4)]
    urls += [hostile.url(f"/text/{i}") for i in range(TARGETS - 4)]
    status, job = api.submit(
        [{"url": u, "mode": "raw" if "/text/" in u else "clean"} for u in urls]
    )
    assert status == 202, job
    done = wait_for_job_status(api, job["job_id"], timeout=180)
    assert done["status"] == "done", done
    return job["job_id"]


@pytest.fixture(scope="module")
def api(hostile):
    with sift_with(hostile, "256KiB") as procs:
        yield procs


@pytest.fixture(scope="module")
def big_job(api, hostile):
    return submit_big_job(api, hostile)


@pytest.fixture(scope="module")
def wide(hostile):
    """Pages of 16 MiB: a reply of the whole job (9 MB) is more than loopback's socket
    buffers take (4 MiB at most), so a reply left unread stays in flight until
    `send_timeout`."""
    with sift_with(hostile, "16MiB") as procs:
        yield procs, submit_big_job(procs, hostile)


def raw_status(api, path: str, who: str = "alice") -> tuple[int, bytes]:
    status, body = http("GET", api.base + path, key=api.keys[who], timeout=30)
    return status, orjson.dumps(body)


def test_a_status_reply_is_bounded_whatever_its_results_and_its_pages_give_each_result_once(
    api, big_job
):
    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        path = f"/v1/batch/{big_job}" + (f"?cursor={cursor}" if cursor else "")
        status, raw = raw_status(api, path)
        assert status == 200, raw[:300]
        assert len(raw) <= REPLY_MAX, len(raw)
        body = orjson.loads(raw)
        assert len(body["targets"]) == TARGETS  # every status in every page
        seen += [t["idx"] for t in body["targets"] if "result" in t]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == list(range(TARGETS)) and pages > 1
    status, _ = raw_status(api, f"/v1/batch/{big_job}?cursor={TARGETS}")
    assert status == 400
    status, _ = raw_status(api, f"/v1/batch/{big_job}?cursor=x1")
    assert status == 400


def test_the_client_reads_every_page_of_results(api, big_job):
    with Client(api.base, api.keys["alice"]) as sift:
        st = sift.batch_status(big_job)
        first = sift.batch_status(big_job, cursor="0")
    assert st["next_cursor"] is None
    assert all("result" in t for t in st["targets"])
    assert first["next_cursor"] is not None


def hold(api, path: str, n: int) -> list[socket.socket]:
    """`n` requests whose replies are never read (a small receive buffer, no recv)."""
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {api.keys['alice']}\r\n\r\n"
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", api.port))
        s.sendall(head.encode())
        socks.append(s)
    return socks


def test_one_callers_unread_replies_never_hold_back_another_callers_status_reads(wide, hostile):
    api, big_job = wide
    status, small = api.submit([hostile.url("/text/0") + "?bob"], who="bob")
    assert status == 202, small
    wait_for_job_status(api, small["job_id"], who="bob", timeout=60)
    socks = hold(api, f"/v1/batch/{big_job}", 4)
    try:
        time.sleep(0.5)  # the four replies are built and stuck in their sockets
        started = time.monotonic()
        status, body = api.call("GET", f"/v1/batch/{small['job_id']}", who="bob")
        took = time.monotonic() - started
        assert status == 200 and "result" in body["targets"][0], body
        assert took < OTHER_CALLER_MAX, took
        status, body = api.call("GET", f"/v1/batch/{big_job}")
        assert status == 429 and body["hint"] == "retry"  # alice's own reads are bounded
        assert proc_memory(api.api.pid, "VmHWM") < API_RSS_MAX
    finally:
        for s in socks:
            s.close()


UNREAD = 6
UNREAD_GROWTH_MAX = 24 * 1024 * 1024  # the shared 7 MB body once, a chunk per read, and slack


@pytest.fixture(scope="module")
def roomy(hostile):
    """Room for six of one caller's whole-job replies (7 MB each) in flight at once."""
    procs = SiftProcs([hostile.port], batch={"targets_per_job": TARGETS, "max_bytes": "256MiB"})
    configure(
        procs,
        server={
            "status_page": "16MiB",
            "status_bytes": "256MiB",
            "status_reads": UNREAD + 1,
            "send_timeout": "20s",
        },
    )
    with procs:
        yield procs, submit_big_job(procs, hostile)


def test_unread_status_replies_hold_no_copy_of_the_shared_body(roomy):
    """docs/SECURITY.md §Status reads: a reply is written from the one shared body a chunk at
    a time, so six unread replies of a 7 MB job cost the API about one body, not six copies."""
    api, big_job = roomy
    status, raw = raw_status(api, f"/v1/batch/{big_job}")
    assert status == 200 and len(raw) > 6 * 1024 * 1024, len(raw)
    time.sleep(0.5)  # the read is written and the API has trimmed after it
    before = proc_memory(api.api.pid)
    socks = hold(api, f"/v1/batch/{big_job}", UNREAD)
    try:
        time.sleep(1.5)  # every reply is built, and stuck in its socket
        grown = proc_memory(api.api.pid) - before
    finally:
        for s in socks:
            s.close()
    assert grown < UNREAD_GROWTH_MAX, grown
