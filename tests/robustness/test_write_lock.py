"""Another process holds the database's write lock for a few seconds (docs/ARCHITECTURE.md §The
database file, docs/WORKER.md §Store errors).

Submits sent meanwhile either wait and succeed, or give up at the busy timeout with `503`
and hint `retry` — never a 500, never a wait beyond the busy timeout. Nothing is half-written,
and the worker, which waited too, drains every job once the lock is released.
"""

from __future__ import annotations

import time

import pytest

from sift.config import StoreConfig
from tests.e2e.procs import wait_for_job_status
from tests.robustness.helpers import (
    LockHolder,
    at_once,
    configure,
    consistency_problems,
    open_readonly,
    read_jobs,
    submit_call,
)

pytestmark = pytest.mark.e2e

HOLD = 3.0  # seconds the other process holds the lock
SHORT_BUSY = 1.0  # [store] busy_timeout of the variant that must give up
SUBMITS = 6  # submits sent at once while it does
SLACK = 0.5  # of a busy timeout: the HTTP round trip around the wait
IN_FLIGHT = 1.5  # seconds the fetch in flight takes: it ends while the lock is held
TOUCH_AGE = 1.2  # seconds: a lease this old is touched by its owner's read


def lists(site, tag, n=SUBMITS):
    return [[site.url(f"/article/{i}?t={tag}&k={k}") for i in range(3)] for k in range(n)]


def hold_and_submit(sift, site, tag):
    """The lock taken by another process while a target is in flight (its fetch ends during
    the lock), then SUBMITS submits and one status read of a finished job (whose lease is due
    a touch) at once."""
    _, old = sift.submit([site.url(f"/article/8?t={tag}")])
    wait_for_job_status(sift, old["job_id"])
    lease = read_jobs(open_readonly(sift.state_dir / "sift.db"))[old["job_id"]].lease
    time.sleep(max(0.0, lease + TOUCH_AGE - time.time()))
    _, inflight = sift.submit(
        [site.url(f"/slow?s={IN_FLIGHT}&t={tag}"), site.url(f"/article/9?t={tag}")]
    )
    wait_for_job_status(sift, inflight["job_id"], ("running",))
    holder = LockHolder(sift.state_dir / "sift.db", HOLD)
    try:
        calls = [submit_call(sift, urls, "alice") for urls in lists(site, tag)]
        calls.append(lambda: sift.call("GET", f"/v1/batch/{old['job_id']}?results=false"))
        answers = at_once(calls)
        released = holder.wait_released()
    finally:
        holder.kill()
    before = {old["job_id"], inflight["job_id"]}
    return before, holder.locked_at, released, answers[:-1], answers[-1]


def assert_drained_and_consistent(sift, site, tag, answers, before, worker_pid):
    """Resubmit what was refused, then every job drains; the tables are whole."""
    conn = open_readonly(sift.state_dir / "sift.db")
    created = {a.body["job_id"] for a in answers if a.status == 202}
    assert set(read_jobs(conn)) == created | before  # a 503 wrote nothing
    for urls, a in zip(lists(site, tag), answers, strict=True):
        if a.status == 503:
            status, body = sift.submit(urls)
            assert status == 202 and body["reused"] is False, body
            created.add(body["job_id"])
    for job_id in created | before:
        job = wait_for_job_status(sift, job_id)
        assert job["status"] == "done", job["targets"]
        assert job["targets_done"] == job["targets_total"] == len(job["targets"])
    assert consistency_problems(conn) == []
    assert sift.worker.pid == worker_pid and sift.worker.alive()
    assert len(read_jobs(conn)) == SUBMITS + len(before)


def test_submits_during_a_write_lock_longer_than_the_busy_timeout_answer_503_retry_in_time(
    fresh, site, tag
):
    sift = fresh(start=False, batch={"jobs_per_caller": 16, "jobs_total": 16})
    configure(sift, store={"busy_timeout": SHORT_BUSY})
    sift.start()
    busy = SHORT_BUSY
    worker_pid = sift.worker.pid
    before, locked, released, answers, read = hold_and_submit(sift, site, tag)

    for a in answers:
        assert a.status in (202, 503), (a.status, a.body)
        assert a.answered_at - max(a.sent_at, locked) < busy * (1 + SLACK), a
    refused = [a for a in answers if a.status == 503]
    assert refused, "the lock outlasted the busy timeout: some submit must give up"
    for a in refused:
        assert a.body == {
            "success": False,
            "error": a.body["error"],
            "hint": "retry",
            "retryable": True,
            "retry_after": None,
        }
        assert a.answered_at < released  # it gave up; it did not wait for the lock
    # The owner's read slides the lease, a write: it may give up like a submit (as documented).
    assert read.answered_at - max(read.sent_at, locked) < busy * (1 + SLACK), read
    if read.status == 503:
        assert read.body["hint"] == "retry", read.body
    else:
        assert read.status == 200 and read.body["job_id"] in before, read
    assert_drained_and_consistent(sift, site, tag, answers, before, worker_pid)


def test_submits_during_a_write_lock_shorter_than_the_busy_timeout_wait_and_succeed(
    fresh, site, tag
):
    sift = fresh(batch={"jobs_per_caller": 16, "jobs_total": 16})
    busy = StoreConfig().busy_timeout  # the default
    assert busy > HOLD
    worker_pid = sift.worker.pid
    before, _locked, released, answers, read = hold_and_submit(sift, site, tag)

    for a in answers:
        assert a.status == 202 and a.body["reused"] is False, (a.status, a.body)
        assert a.answered_at > released  # it waited for the lock …
        assert a.answered_at - a.sent_at < busy  # … and no longer than the busy timeout
    assert len({a.body["job_id"] for a in answers}) == SUBMITS
    assert read.status == 200 and read.body["job_id"] in before, read
    assert_drained_and_consistent(sift, site, tag, answers, before, worker_pid)
