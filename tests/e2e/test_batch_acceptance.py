"""Batch acceptance, end to end: the real `sift serve` and `sift-worker` processes, the real fetch
against the loopback test site, and HTTP from the outside (docs/API.md §POST /v1/batch, §GET
/v1/batch/{job_id})."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.procs import cli, wait_for_job_status, wait_until

pytestmark = pytest.mark.e2e


def urls(site, tag, *paths):
    sep = lambda p: "&" if "?" in p else "?"  # noqa: E731
    return [site.url(f"{p}{sep(p)}t={tag}") for p in paths]


def wait_logged(sift, job_id, msg="batch job finished"):
    """The worker logs after it commits: wait for the line before scanning the logs."""
    wait_until(
        lambda: any(
            line.get("msg") == msg and line.get("job_id") == job_id for line in sift.log_lines()
        ),
        what=f"log line {msg!r} for {job_id}",
    )


def leaks(lines, site, tag):
    """Log lines that carry the site's host, its address, or a path the test asked for."""
    needles = (site.host, "127.0.0.1", "127.0.0.2", f"t={tag}", "/article/", "/to-blocked")
    return [ln for ln in lines if any(n in json.dumps(ln) for n in needles)]


def test_submit_is_202_and_resubmitting_the_same_list_reuses_the_job(sift, site, tag):
    targets = urls(site, tag, "/article/1", "/article/2")
    status, first = sift.submit(targets)
    assert status == 202, first
    assert first["success"] is True and first["reused"] is False and first["targets"] == 2
    status, again = sift.submit(targets)
    assert status == 202 and again["reused"] is True and again["job_id"] == first["job_id"]
    wait_for_job_status(sift, first["job_id"])
    status, after = sift.submit(targets)
    assert after["reused"] is True and after["status"] == "done"


def test_a_target_on_a_port_outside_the_allowed_list_is_422_at_submit(sift, site, tag):
    targets = [*urls(site, tag, "/article/1"), f"http://127.0.0.1:22/?t={tag}"]
    status, body = sift.submit(targets)
    assert status == 422, body
    assert body["success"] is False and body["idx"] == 1
    assert body["error"].startswith("target 1: ") and "port 22" in body["error"]
    assert not any(tag in hit for hit in site.hits)


def test_33_targets_are_422_at_submit(sift, site, tag):
    status, body = sift.submit(urls(site, tag, *[f"/article/{i}" for i in range(33)]))
    assert status == 422 and "too many targets" in body["error"]


def test_a_target_blocked_after_the_pre_check_fails_alone_and_the_job_is_partial(sift, site, tag):
    targets = urls(site, tag, "/article/3", "/to-blocked", "/data.json")
    status, sub = sift.submit(targets)
    assert status == 202, sub
    job = wait_for_job_status(sift, sub["job_id"])
    assert job["status"] == "partial" and job["error"] == ""
    assert job["targets_done"] == 3
    ok1, blocked, ok2 = job["targets"]
    assert (ok1["status"], ok2["status"]) == ("done", "done")
    assert blocked["status"] == "failed"
    assert "127.0.0.2" in blocked["error"] and "not public" in blocked["error"]
    assert "hint" in blocked and "result" not in blocked
    assert site.accepted == []  # nothing ever reached 127.0.0.2


def test_another_callers_get_and_delete_are_404_exactly_like_an_unknown_id(sift, site, tag):
    status, sub = sift.submit(urls(site, tag, "/article/4"))
    assert status == 202
    path = f"/v1/batch/{sub['job_id']}"
    unknown = "/v1/batch/" + "0" * 32
    for who in ("bob", "spy"):
        assert sift.call("GET", path, who=who) == sift.call("GET", unknown, who=who)
        assert sift.call("GET", path, who=who)[0] == 404
        assert sift.call("DELETE", path, who=who) == sift.call("DELETE", unknown, who=who)
    assert wait_for_job_status(sift, sub["job_id"])["status"] == "done"


def test_cancel_stores_the_target_in_flight_and_leaves_later_targets_pending(sift, site, tag):
    targets = [site.held(tag), *urls(site, tag, "/article/5", "/article/6")]
    _, sub = sift.submit(targets)
    job_id = sub["job_id"]
    wait_until(
        lambda: sift.job(job_id)["targets"][0]["status"] == "running", what="target 0 in flight"
    )
    status, body = sift.call("DELETE", f"/v1/batch/{job_id}")
    assert (status, body) == (200, {"success": True, "status": "cancelled"})
    assert sift.job(job_id)["status"] == "cancelled"  # at once, before the fetch ends
    site.release(tag)
    wait_until(lambda: sift.job(job_id)["targets"][0]["status"] != "running", what="stored")
    # A later job of the same caller drains to the end: the worker has moved on by then.
    _, later = sift.submit(urls(site, tag, "/article/7"))
    wait_for_job_status(sift, later["job_id"])
    job = sift.job(job_id)
    assert job["status"] == "cancelled"
    assert job["targets"][0]["status"] == "done" and job["targets"][0]["result"]["content"]
    assert [t["status"] for t in job["targets"][1:]] == ["pending", "pending"]
    assert not any(
        f"t={tag}" in h and h.startswith(("/article/5", "/article/6")) for h in site.hits
    )
    assert sift.call("DELETE", f"/v1/batch/{job_id}") == (200, body)


def test_wait_returns_as_soon_as_the_job_ends(sift, site, tag):
    limit = 30
    _, sub = sift.submit(urls(site, tag, "/slow?s=0.5", "/article/8"))
    started = time.monotonic()
    status, body = sift.call("GET", f"/v1/batch/{sub['job_id']}?wait={limit}", timeout=limit + 10)
    held = time.monotonic() - started
    assert status == 200 and body["status"] == "done"
    assert held < limit / 4  # answered when the job ended, not at the wait limit


def test_results_false_leaves_out_the_result_objects(sift, site, tag):
    _, sub = sift.submit(urls(site, tag, "/article/9", "/status/404"))
    wait_for_job_status(sift, sub["job_id"])
    full = sift.job(sub["job_id"])
    lean = sift.job(sub["job_id"], query="?results=false")
    assert "result" in full["targets"][0]
    assert all("result" not in t for t in lean["targets"])
    assert [t["status"] for t in lean["targets"]] == ["done", "failed"]
    assert lean["targets"][1]["hint"] == "recover" and "404" in lean["targets"][1]["error"]
    strip = lambda b: [{k: v for k, v in t.items() if k != "result"} for t in b["targets"]]  # noqa: E731
    assert strip(full) == strip(lean)


def test_a_restricted_callers_batch_leaves_no_url_or_host_in_any_log_line(sift, site, tag):
    mark = sift.log_mark()
    _, sub = sift.submit(
        urls(site, tag, "/article/10", "/to-blocked", "/status/500", "/nothing-here"), who="spy"
    )
    job = wait_for_job_status(sift, sub["job_id"], who="spy")
    assert job["status"] == "partial"
    wait_logged(sift, sub["job_id"])
    lines = sift.log_lines(since=mark)
    assert any(ln.get("job_id") == sub["job_id"] for ln in lines)
    assert leaks(lines, site, tag) == []


def test_no_batch_log_line_of_any_caller_carries_a_url_or_host(sift, site, tag):
    mark = sift.log_mark()
    _, sub = sift.submit(
        urls(site, tag, "/article/11", "/to-blocked", "/status/503", "/image.png"), who="bob"
    )
    assert wait_for_job_status(sift, sub["job_id"], who="bob")["status"] == "partial"
    wait_logged(sift, sub["job_id"])
    lines = sift.log_lines(since=mark)
    batch = [ln for ln in lines if ln.get("job_id") == sub["job_id"]]
    assert {ln.get("idx") for ln in batch if ln.get("msg") == "batch target stored"} == {0, 1, 2, 3}
    assert leaks(lines, site, tag) == []


def test_a_done_jobs_inline_results_have_the_fetch_envelope_shape(sift, site, tag):
    targets = [
        {"url": urls(site, tag, "/article/12")[0]},
        {"url": urls(site, tag, "/data.json")[0], "jq": ".items[].name"},
        {"url": urls(site, tag, "/plain.txt")[0], "grep": "needle"},
        {"url": urls(site, tag, "/article/13")[0], "question": "What will it cost?"},
        {"url": urls(site, tag, "/pages/tech_article")[0], "links": False, "images": False},
    ]
    status, sub = sift.submit(targets)
    assert status == 202
    job = wait_for_job_status(sift, sub["job_id"])
    assert job["status"] == "done" and job["targets_done"] == job["targets_total"] == 5
    assert job["created_at"].endswith("Z")
    for target, entry in zip(targets, job["targets"], strict=True):
        assert entry["url"] == target["url"]
        status, live = sift.call("POST", "/v1/fetch", target)
        assert status == 200, live
        result = entry["result"]
        assert set(result) == set(live)
        assert result["success"] is True and result["source"] == "live"
        for key in set(live) - {"cached", "fetched_at"}:
            assert result[key] == live[key], key
    assert "alpha" in job["targets"][1]["result"]["content"]
    assert job["targets"][2]["result"]["matches"] == 10
    assert job["targets"][3]["result"]["answer_by"] == "passages"
    tech = job["targets"][4]["result"]
    assert tech["metadata"]["author"] == "Morgan Tide"
    assert "SQLite WAL documentation" in tech["content"] and "](" not in tech["content"]


def test_the_cli_submits_waits_cancels_and_fetches_against_the_real_processes(sift, site, tag):
    lines = "\n".join(["# two pages", *urls(site, tag, "/article/14", "/status/404"), ""])
    out = cli(sift, "batch", "submit", "-", stdin=lines)
    assert out.returncode == 0, out.stderr
    sub = json.loads(out.stdout)
    assert sub["reused"] is False and sub["targets"] == 2

    out = cli(sift, "batch", "status", sub["job_id"], "--wait")
    assert out.returncode == 3, out.stderr  # partial
    job = json.loads(out.stdout)
    assert job["status"] == "partial"
    assert job["targets"][0]["result"]["title"] == "Breakwater 14"
    assert job["targets"][1]["hint"] == "recover"

    out = cli(sift, "batch", "cancel", sub["job_id"])
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip() == "sift: job already finished: partial (HTTP 409)"

    out = cli(sift, "batch", "submit", "-", stdin="\n".join([site.held(tag), site.url("/gz")]))
    slow = json.loads(out.stdout)
    out = cli(sift, "batch", "cancel", slow["job_id"])
    site.release(tag)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"success": True, "status": "cancelled"}
    out = cli(sift, "batch", "status", slow["job_id"], "--wait", "--no-results")
    assert json.loads(out.stdout)["status"] == "cancelled"

    out = cli(sift, "fetch", urls(site, tag, "/plain.txt")[0], "--grep", "needle")
    assert out.returncode == 0, out.stderr
    assert "line 10: needle" in out.stdout and "hay" in out.stdout

    out = cli(sift, "fetch", site.url("/status/500"))
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "hint: recover" in out.stderr
