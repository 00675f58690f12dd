"""`?wait=S` under load: many held requests cost the worker nothing (docs/API.md §GET
/v1/batch/{job_id}).

Held requests may hold no database transaction: while 200 of them wait, another connection
takes the write lock at once, every time. And the worker drains as fast as without them.
"""

from __future__ import annotations

import subprocess
import sys
import time

import apsw
import orjson
import pytest

from tests.e2e.procs import ROOT, wait_for_job_status

pytestmark = pytest.mark.e2e

HELD = 200
SLOW = 8


def submit_held_job(sift, site, tag: str) -> str:
    """A job whose first target waits for `site.release(tag)`, then SLOW pages of 50 ms."""
    urls = [site.held(tag)] + [site.url(f"/slow?s=0.05&{tag}={i}") for i in range(SLOW)]
    status, body = sift.submit(urls)
    assert status == 202, body
    return body["job_id"]


def drain_span(sift, site, tag: str, job_id: str) -> float:
    """Release the held target; seconds from the first slow page's request to the last's."""
    site.release(tag)
    assert wait_for_job_status(sift, job_id, timeout=60)["status"] == "done"
    times = [t for t, path in list(site.hit_at) if f"&{tag}=" in path]
    assert len(times) == SLOW
    return max(times) - min(times)


def wait_until_fetching(site, tag: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(path.endswith(f"/held/{tag}") for path in list(site.hits)):
        assert time.monotonic() < deadline, "the worker never started the held target"
        time.sleep(0.01)


def write_lock_free_throughout(db_path, seconds: float = 0.5) -> bool:
    """Whether `BEGIN IMMEDIATE` keeps succeeding without waiting for `seconds`: never busy for
    longer than a heartbeat's own short write (a held request that took the lock would be)."""
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE)  # never a new file
    conn.setbusytimeout(0)
    deadline = time.monotonic() + seconds
    busy_since = None
    try:
        while time.monotonic() < deadline:
            try:
                conn.execute("begin immediate")
            except apsw.BusyError:
                busy_since = busy_since or time.monotonic()
                if time.monotonic() - busy_since > 0.05:
                    return False
            else:
                conn.execute("rollback")
                busy_since = None
            time.sleep(0.005)
        return True
    finally:
        conn.close()


def test_two_hundred_held_requests_do_not_slow_the_worker(sift, site, tag):
    alone_job = submit_held_job(sift, site, f"{tag}a")
    wait_until_fetching(site, f"{tag}a")
    alone = drain_span(sift, site, f"{tag}a", alone_job)

    job_id = submit_held_job(sift, site, f"{tag}b")
    wait_until_fetching(site, f"{tag}b")
    args = [sift.base, sift.keys["alice"], job_id, str(HELD)]
    holders = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.holders", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holders.stdout.readline().strip() == "held"
        time.sleep(0.3)  # let the API parse the last requests it was sent
        assert write_lock_free_throughout(sift.state_dir / "sift.db")
        loaded = drain_span(sift, site, f"{tag}b", job_id)
        out, _ = holders.communicate(timeout=60)
    finally:
        if holders.poll() is None:
            holders.kill()
            holders.wait()
    assert orjson.loads(out) == [[200, "done"]] * HELD
    assert loaded / alone < 1.5, (alone, loaded)
