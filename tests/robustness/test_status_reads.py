"""Status reads are bounded in memory per reply and in total, and the API's memory returns to
its baseline (docs/SECURITY.md §Limits and isolation)."""

from __future__ import annotations

import socket
import time

import pytest

from sift import batch
from sift import config as configmod
from sift.api.status_reads import StatusReads
from sift.auth import Caller
from sift.errors import NotFound
from sift.store import open_store
from tests.e2e.procs import wait_for_job_status, wait_until
from tests.robustness.helpers import configure, proc_memory

API_RSS_MAX = 150 * 1024 * 1024
HELD = 100


@pytest.fixture
def big_job(fresh, site, tag):
    """A finished job of 32 targets whose results are 100,000 characters each."""
    procs = fresh(start=False)
    configure(
        procs,
        server={"send_timeout": "6s"},
        batch={"targets_per_job": 32, "max_bytes": "256MiB"},
    )
    procs.start()
    urls = [site.url(f"/big?words=40000&n={i}&t={tag}") for i in range(32)]
    status, job = procs.submit(urls)
    assert status == 202, job
    done = wait_for_job_status(procs, job["job_id"], timeout=120)
    assert done["status"] == "done"
    assert all(t["result"]["chars"] >= 90_000 for t in done["targets"])
    return procs, job["job_id"]


def hold(procs, path: str, n: int) -> list[socket.socket]:
    """`n` requests whose replies are never read (a small receive buffer, no recv)."""
    key = procs.keys["alice"]
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", procs.port))
        s.sendall(head)
        socks.append(s)
    return socks


@pytest.mark.e2e
def test_held_status_reads_of_a_big_job_stay_bounded_and_memory_returns(big_job):
    procs, job_id = big_job
    pid = procs.api.pid
    baseline = proc_memory(pid)
    peak = baseline
    socks = hold(procs, f"/v1/batch/{job_id}?wait=60", HELD)
    try:
        # The held replies are admitted and stuck in their sockets: one more read is refused.
        status, body = procs.call("GET", f"/v1/batch/{job_id}")
        assert status == 429 and body["hint"] == "retry", body
        status, lean = procs.call("GET", f"/v1/batch/{job_id}?results=false")
        assert status == 200 and lean["status"] == "done"
        until = time.monotonic() + 2
        while time.monotonic() < until:
            peak = max(peak, proc_memory(pid))
            time.sleep(0.05)
    finally:
        for s in socks:
            s.close()
    assert peak < API_RSS_MAX, f"API RSS {peak / 2**20:.0f} MiB"

    def back_to_baseline() -> bool:
        return proc_memory(pid) < baseline + 24 * 1024 * 1024

    wait_until(back_to_baseline, timeout=20, what="API RSS back to its baseline")
    status, body = procs.call("GET", f"/v1/batch/{job_id}")
    assert status == 200 and len(body["targets"]) == 32


@pytest.mark.e2e
def test_another_callers_job_is_a_404_with_the_same_body_as_an_unknown_id(big_job):
    procs, job_id = big_job
    answers = [
        procs.call("GET", path, who="bob")
        for path in (f"/v1/batch/{job_id}", "/v1/batch/" + "0" * 32)
    ]
    assert answers[0] == answers[1]
    assert answers[0][0] == 404 and answers[0][1]["error"] == "job not found"


async def test_another_callers_job_takes_the_unknown_ids_path_one_job_row_and_no_targets(
    state_dir,
):
    """The 404 for another caller's job reads what the 404 for an unknown id reads: the job
    row alone, never the targets and their results (which made it 12 times slower)."""
    cfg = configmod.from_dict({"store": {"state_dir": str(state_dir)}})
    store = open_store(cfg)
    try:
        job = await batch.submit(
            store, cfg.batch, Caller("alice"), [{"url": "http://127.0.0.1:9/a"}], now=1.0e9
        )
        reads = StatusReads(store, cfg.server)
        calls: list[str] = []
        for name in ("job", "status"):
            real = getattr(store.batch, name)

            async def spy(*args, _real=real, _name=name, **kwargs):
                calls.append(_name)
                return await _real(*args, **kwargs)

            setattr(store.batch, name, spy)
        for job_id in (job.job_id, "0" * 32):
            with pytest.raises(NotFound):
                await reads.job(job_id, Caller("bob"))
        assert calls == ["job", "job"]
    finally:
        store.close()
