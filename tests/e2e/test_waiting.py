"""Why a pending batch target waits and until when, through the real API and worker processes
(docs/API.md §Waiting targets), and what the CLI and MCP show of it."""

from __future__ import annotations

import threading

import pytest

from tests.e2e.procs import cli_popen, wait_for_job_status, wait_until

pytestmark = pytest.mark.e2e


def running(procs, job_id, idx=0):
    wait_until(
        lambda: procs.job(job_id)["targets"][idx]["status"] == "running",
        what=f"target {idx} of {job_id} running",
    )


def test_a_target_behind_a_running_one_waits_its_turn_and_the_job_has_an_eta(sift, site, tag):
    status, sub = sift.submit([site.held(tag), site.url(f"/article/41?{tag}")])
    assert status == 202, sub
    try:
        running(sift, sub["job_id"])
        job = sift.job(sub["job_id"], query="?results=false")
        assert "waiting" not in job["targets"][0]  # running: nothing to explain
        assert job["targets"][1]["waiting"] == {
            "reason": "turn",
            "host": "127.0.0.1",
            "not_before": None,
        }
        assert 0 <= job["eta"]["min"] <= job["eta"]["max"]
    finally:
        site.release(tag)
    done = wait_for_job_status(sift, sub["job_id"])
    assert "eta" not in done and all("waiting" not in t for t in done["targets"])


def test_another_jobs_fetch_on_the_same_host_makes_it_host_busy(sift, site, tag):
    status, first = sift.submit([site.held(tag)], who="alice")
    assert status == 202, first
    try:
        running(sift, first["job_id"])
        status, second = sift.submit([site.url(f"/article/42?{tag}")], who="bob")
        assert status == 202, second
        # The drain may claim bob's target to learn its host and put it back (docs/WORKER.md
        # §Handing off slow targets): for those few ms it reads as running, with no reason.
        wait_until(
            lambda: sift.job(second["job_id"], who="bob")["targets"][0].get("waiting"),
            what="bob's target waiting",
        )
        job = sift.job(second["job_id"], who="bob")
        assert job["targets"][0]["waiting"]["reason"] == "host_busy"
        assert job["targets"][0]["waiting"]["host"] == "127.0.0.1"
    finally:
        site.release(tag)
    assert wait_for_job_status(sift, second["job_id"], who="bob")["status"] == "done"


def test_without_a_worker_every_pending_target_says_worker_down(fresh, site, tag):
    procs = fresh(start=False)
    procs.start_api()
    status, sub = procs.submit([site.url(f"/article/43?{tag}"), site.url(f"/article/44?{tag}")])
    assert status == 202, sub
    job = procs.job(sub["job_id"])
    assert [t["waiting"]["reason"] for t in job["targets"]] == ["worker_down"] * 2
    assert job["eta"] is None


def test_the_progress_line_names_the_slow_target_by_idx_and_short_url(sift, site, tag):
    """docs/BATCH.md §Progress: the target being fetched, not only its host."""
    status, sub = sift.submit([site.url(f"/article/45?{tag}"), site.held(tag)])
    assert status == 202, sub
    proc = cli_popen(sift, "batch", "status", sub["job_id"], "--wait", "--progress", "plain")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")))
    reader.start()
    wanted = f"fetching #1 {site.host}/held/{tag}"
    try:
        wait_until(lambda: any(wanted in ln for ln in lines), what="the slow target named")
    finally:
        site.release(tag)
        proc.wait(30)
        reader.join(10)
    assert proc.returncode == 0, lines
    assert lines[-1].startswith("sift: done: 2 of 2 finished (2 ok, 0 failed)")
