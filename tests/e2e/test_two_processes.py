"""The two-process rules (docs/ARCHITECTURE.md §The two processes, docs/WORKER.md §Restart
semantics): the API and the worker as real processes
sharing one database, killed and restarted by the PIDs the tests started."""

from __future__ import annotations

import signal
import time

import pytest

from tests.e2e.procs import wait_for_job_status, wait_until

pytestmark = pytest.mark.e2e


def in_flight(procs, job_id, idx):
    """Wait until target `idx` of the job is being fetched."""
    wait_until(
        lambda: procs.job(job_id)["targets"][idx]["status"] == "running",
        what=f"target {idx} of {job_id} in flight",
    )


def test_a_job_submitted_to_the_api_is_drained_by_the_worker_process_to_done(fresh, site):
    procs = fresh()
    status, sub = procs.submit([site.url("/article/21"), site.url("/data.json?two=1")])
    assert status == 202 and sub["status"] == "queued"
    job = wait_for_job_status(procs, sub["job_id"])
    assert job["status"] == "done" and job["targets_done"] == 2
    assert all(t["result"]["success"] for t in job["targets"])
    assert procs.worker.alive() and procs.api.alive()


def test_a_worker_sigkilled_mid_target_leaves_the_job_failed_restart_on_its_next_start(fresh, site):
    procs = fresh()
    _, sub = procs.submit(
        [site.url("/article/22"), site.url("/slow?s=20&k=1"), site.url("/article/23")]
    )
    job_id = sub["job_id"]
    in_flight(procs, job_id, 1)
    procs.worker.kill()
    assert procs.job(job_id)["status"] == "running"  # nobody drains it now
    procs.start_worker()
    job = procs.job(job_id)
    assert (job["status"], job["error"]) == ("failed", "restart")
    first, killed, never = job["targets"]
    assert first["status"] == "done" and "Harbour breakwater" in first["result"]["content"]
    assert killed["status"] == "pending" and never["status"] == "pending"
    assert not any(h.startswith("/article/23") for h in site.hits)
    # Jobs never resume: a new one drains, the failed one stays as it is.
    _, later = procs.submit([site.url("/article/24")])
    assert wait_for_job_status(procs, later["job_id"])["status"] == "done"
    assert procs.job(job_id)["status"] == "failed"


def test_restarting_the_api_alone_mid_job_does_not_disturb_the_job(fresh, site):
    procs = fresh()
    _, sub = procs.submit(
        [site.url("/slow?s=1&k=2"), site.url("/article/25"), site.url("/article/26")]
    )
    in_flight(procs, sub["job_id"], 0)
    worker_pid = procs.worker.pid
    procs.restart_api()
    job = wait_for_job_status(procs, sub["job_id"])
    assert job["status"] == "done" and job["error"] == "" and job["targets_done"] == 3
    assert procs.worker.pid == worker_pid and procs.worker.alive()


def test_sigterm_mid_target_lets_the_fetch_finish_within_grace_and_exits_0(fresh, site):
    procs = fresh(batch={"grace": "30s"})
    _, sub = procs.submit([site.held("grace"), site.url("/article/27"), site.url("/article/28")])
    job_id = sub["job_id"]
    in_flight(procs, job_id, 0)
    worker = procs.worker
    worker.signal(signal.SIGTERM)
    wait_until(lambda: "SIGTERM received" in worker.log_text(), what="SIGTERM seen")
    assert worker.alive()  # waiting for the fetch in flight
    site.release("grace")
    assert worker.wait(30) == 0
    job = procs.job(job_id)
    assert job["targets"][0]["status"] == "done"  # finished within the grace period
    assert [t["status"] for t in job["targets"][1:]] == ["pending", "pending"]  # none taken
    procs.start_worker()
    job = procs.job(job_id)
    assert (job["status"], job["error"]) == ("failed", "restart")
    assert job["targets"][0]["result"]["content"] == "released"
    assert not any(h.startswith("/article/27") for h in site.hits)


def test_sigterm_cancels_a_fetch_that_outlasts_the_grace_period_and_exits_0(fresh, site):
    slow = 30
    procs = fresh(batch={"grace": "0.5s"})
    _, sub = procs.submit([site.url(f"/slow?s={slow}&k=4"), site.url("/article/29")])
    job_id = sub["job_id"]
    in_flight(procs, job_id, 0)
    sent = time.monotonic()
    procs.worker.signal(signal.SIGTERM)
    assert procs.worker.wait(slow) == 0
    assert time.monotonic() - sent < slow / 3  # it did not wait for the page
    cut = procs.job(job_id)["targets"][0]
    assert cut["status"] == "failed" and "shut down" in cut["error"]
    procs.start_worker()
    job = procs.job(job_id)
    assert (job["status"], job["error"]) == ("failed", "restart")
    assert job["targets"][1]["status"] == "pending"
    status, body = procs.call("GET", "/v1/batch/" + job_id)
    assert status == 200 and not any(t["status"] == "running" for t in body["targets"])


def test_a_second_worker_stands_by_and_takes_over_when_the_first_is_sigkilled(fresh, site):
    procs = fresh()
    first = procs.worker
    second = procs.start_worker(wait=False)
    wait_until(lambda: "standing by" in second.log_text(), what="second worker standing by")
    _, sub = procs.submit([site.url("/slow?s=20&k=5"), site.url("/article/30")])
    job_id = sub["job_id"]
    in_flight(procs, job_id, 0)
    assert procs.health()["worker"]["pid"] == first.pid
    first.kill()
    procs.wait_worker_active(second)
    assert "taking over" in second.log_text()
    job = procs.job(job_id)
    assert (job["status"], job["error"]) == ("failed", "restart")
    _, later = procs.submit([site.url("/article/31")])
    assert wait_for_job_status(procs, later["job_id"])["status"] == "done"


def test_a_drain_leaves_no_warning_or_traceback_in_either_processs_log(fresh, site):
    """What an operator reads: the API's and the worker's stderr (their render children's
    included) say nothing is wrong when nothing is."""
    procs = fresh()
    _, sub = procs.submit([site.url("/article/31"), site.url("/article/32")])
    assert wait_for_job_status(procs, sub["job_id"])["status"] == "done"
    for proc in (procs.api, procs.worker):
        log = proc.log_text()
        assert "Warning" not in log and "Traceback" not in log, log[-2000:]
