"""What a newcomer meets in the first hour, through the real API, worker and CLI processes:
the page's headings below the per-target ones, and `max_age` against the content cache
(docs/BATCH.md §Results, docs/API.md §POST /v1/fetch)."""

from __future__ import annotations

import json
import shutil
import signal
import stat
import subprocess

import pytest

from tests import harness
from tests.e2e.procs import cli, free_port, http, short_tmp, wait_until

pytestmark = pytest.mark.e2e


def test_markdown_output_demotes_the_pages_own_headings(sift, site, tag):
    url = site.url(f"/article/31?{tag}")
    out = cli(sift, "batch", "submit", "-", "--wait", "--format", "md", stdin=url)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("# ")] == [lines[0]]  # the job's heading only
    assert sum(ln.startswith("## 0. ") for ln in lines) == 1
    assert "### Harbour breakwater to be rebuilt (31)" in lines


def test_max_age_0_fetches_again_where_the_cache_would_answer(sift, site, tag):
    url = site.url(f"/article/32?{tag}")
    path = f"/article/32?{tag}"
    assert sift.call("POST", "/v1/fetch", {"url": url})[1]["cached"] is False
    assert sift.call("POST", "/v1/fetch", {"url": url})[1]["cached"] is True
    assert sift.call("POST", "/v1/fetch", {"url": url, "max_age": 3600})[1]["cached"] is True
    hits = site.hits.count(path)
    status, body = sift.call("POST", "/v1/fetch", {"url": url, "max_age": 0})
    assert (status, body["cached"]) == (200, False) and site.hits.count(path) == hits + 1
    out = cli(sift, "fetch", url, "--max-age", "0", "--json")
    assert json.loads(out.stdout)["cached"] is False and site.hits.count(path) == hits + 2
    out = cli(sift, "fetch", url, "--json")  # the copy fetched last is cached again
    assert json.loads(out.stdout)["cached"] is True and site.hits.count(path) == hits + 2


def test_a_batch_with_max_age_0_fetches_again_and_fresh_alone_may_not(sift, site, tag):
    """docs/BATCH.md §Submit: --fresh is a new job; --max-age 0 is a new copy of each page."""
    url = site.url(f"/article/33?{tag}")
    path = f"/article/33?{tag}"
    assert sift.call("POST", "/v1/fetch", {"url": url})[1]["cached"] is False
    hits = site.hits.count(path)
    out = cli(sift, "batch", "submit", "-", "--fresh", "--wait", stdin=url)
    assert json.loads(out.stdout)["targets"][0]["result"]["cached"] is True
    assert site.hits.count(path) == hits
    out = cli(sift, "batch", "submit", "-", "--fresh", "--max-age", "0", "--wait", stdin=url)
    assert json.loads(out.stdout)["targets"][0]["result"]["cached"] is False
    assert site.hits.count(path) == hits + 1


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, 10**9])
def test_a_bad_max_age_is_a_400_naming_the_field(sift, site, bad):
    status, body = sift.call("POST", "/v1/fetch", {"url": site.url("/article/1"), "max_age": bad})
    assert status == 400 and '"max_age"' in body["error"]


def test_serve_and_the_worker_create_a_missing_state_dir_0700(site):
    """docs/OPERATIONS.md §Running it: as `sift up` does, not only under systemd."""
    home = short_tmp()
    state_dir = home / "new" / "state"
    port = free_port()
    config = harness.write_config(home / "sift.toml", state_dir=state_dir, port=port)
    base = f"http://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(harness.spawn("api", config, stdout=subprocess.DEVNULL))
        wait_until(lambda: _health(base) is not None, timeout=30, what="API up")
        assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
        shutil.rmtree(state_dir)  # the worker makes it too, on its own
        procs.append(harness.spawn("worker", config, stdout=subprocess.DEVNULL))
        wait_until(lambda: (state_dir / "worker.lock").exists(), timeout=30, what="worker")
        assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(home, ignore_errors=True)


def _health(base: str):
    try:
        return http("GET", base + "/healthz", timeout=2)[1]
    except OSError:
        return None


def test_caller_busy_names_the_sift_commands_not_the_route(fresh, site, tag):
    """docs/BATCH.md §Hints for people."""
    procs = fresh(batch={"jobs_per_caller": 1})
    status, sub = procs.submit([site.held(tag)])
    assert status == 202, sub
    try:
        out = cli(procs, "batch", "submit", "-", stdin=site.url(f"/article/34?{tag}"))
    finally:
        site.release(tag)
    assert out.returncode == 1 and out.stdout == ""
    job = sub["job_id"]
    assert out.stderr.startswith(f"sift: caller busy: your job {job} is still live")
    assert f"'sift batch status {job} --wait'" in out.stderr
    assert f"'sift batch cancel {job}'" in out.stderr
    assert "/v1/" not in out.stderr and out.stderr.count("\n") == 1
