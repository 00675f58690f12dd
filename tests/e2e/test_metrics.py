"""Metrics (docs/OPERATIONS.md §Metrics): one scrape of the API's /metrics shows the worker's batch
series too, with exact names and label values, exact counts after a known sequence of jobs, and no
URL or host anywhere."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sift import config
from sift.metrics import ApiMetrics
from sift.store import counters, open_store, series
from sift.store.db import Database
from tests.e2e.procs import http, wait_for_job_status, wait_until

pytestmark = pytest.mark.e2e

# The contract's names and label values, written out rather than imported.
JOB_OUTCOMES = {"created", "reused", "done", "partial", "failed", "cancelled", "restart", "other"}
TARGET_OUTCOMES = {
    "ok",
    "blocked",
    "robots",
    "timeout",
    "busy",
    "upstream_4xx",
    "upstream_5xx",
    "unsupported",
    "too_long",
    "cancel",
    "restart",  # engine postgres: the target's worker died (docs/WORKER.md §Several workers)
    "other",
}
HISTOGRAMS = ("sift_batch_job_seconds", "sift_batch_target_seconds", "sift_batch_result_bytes")


def scrape(procs) -> dict[tuple[str, tuple], float]:
    """Every sample of one scrape: (sample name, sorted labels) -> value."""
    out = {}
    for fam in text_string_to_metric_families(procs.metrics_text()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def outcome(name: str, value: str) -> tuple[str, tuple]:
    return (name, (("outcome", value),))


def plain(name: str) -> tuple[str, tuple]:
    return (name, ())


def delta(after: dict, before: dict, keys) -> dict:
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in keys}


def test_one_scrape_shows_every_batch_series_with_its_exact_names_and_labels(sift):
    families = {f.name: f for f in text_string_to_metric_families(sift.metrics_text())}
    jobs, targets = families["sift_batch_jobs"], families["sift_batch_targets"]
    assert jobs.type == targets.type == "counter"
    assert {s.labels["outcome"] for s in jobs.samples if s.name == "sift_batch_jobs_total"} == (
        JOB_OUTCOMES
    )
    assert {
        s.labels["outcome"] for s in targets.samples if s.name == "sift_batch_targets_total"
    } == TARGET_OUTCOMES
    for gauge in ("sift_batch_queue_depth", "sift_batch_targets_inflight"):
        assert families[gauge].type == "gauge"
        assert [s.name for s in families[gauge].samples] == [gauge]
    for name in HISTOGRAMS:
        assert families[name].type == "histogram"
        names = {s.name for s in families[name].samples}
        assert names == {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
        les = [s.labels["le"] for s in families[name].samples if s.name.endswith("_bucket")]
        assert les[-1] == "+Inf" and len(les) > 3
    assert families["sift_fetch_requests"].type == "counter"
    assert families["sift_fetch_seconds"].type == "histogram"


def test_counters_gauges_and_histograms_match_a_known_sequence_of_jobs_across_a_restart(
    sift, site, tag
):
    u = lambda path: site.url(f"{path}{'&' if '?' in path else '?'}t={tag}")  # noqa: E731
    before = scrape(sift)

    # done, then reused
    _, a = sift.submit([u("/article/1"), u("/article/2")])
    assert wait_for_job_status(sift, a["job_id"])["status"] == "done"
    assert sift.submit([u("/article/1"), u("/article/2")])[1]["reused"] is True
    # partial: one ok, one upstream 4xx
    _, b = sift.submit([u("/article/3"), u("/status/404")])
    assert wait_for_job_status(sift, b["job_id"])["status"] == "partial"
    # failed: blocked after the pre-check, upstream 5xx
    _, c = sift.submit([u("/to-blocked"), u("/status/500")])
    assert wait_for_job_status(sift, c["job_id"])["status"] == "failed"
    # cancelled while its first target is in flight; that target is still stored (ok)
    _, d = sift.submit([site.held(tag), u("/article/4"), u("/article/5")])
    wait_until(lambda: sift.job(d["job_id"])["targets"][0]["status"] == "running")
    assert sift.call("DELETE", f"/v1/batch/{d['job_id']}")[0] == 200
    site.release(tag)
    wait_until(lambda: sift.job(d["job_id"])["targets"][0]["status"] == "done")
    # restart: the worker dies mid-target; the next worker fails the job
    _, e = sift.submit([u("/slow?s=20"), u("/article/6")])
    wait_until(lambda: sift.job(e["job_id"])["targets"][0]["status"] == "running")
    mid = scrape(sift)
    assert mid[plain("sift_batch_queue_depth")] == 1
    assert mid[plain("sift_batch_targets_inflight")] == 1
    sift.worker.kill()
    sift.start_worker()
    assert sift.job(e["job_id"])["error"] == "restart"
    # the new worker counts on from where the old one stopped
    _, f = sift.submit([u("/article/7")])
    assert wait_for_job_status(sift, f["job_id"])["status"] == "done"

    after = scrape(sift)
    jobs = delta(after, before, [outcome("sift_batch_jobs_total", o) for o in JOB_OUTCOMES])
    assert jobs == {
        outcome("sift_batch_jobs_total", o): float(n)
        for o, n in {
            "created": 6,
            "reused": 1,
            "done": 2,
            "partial": 1,
            "failed": 1,
            "cancelled": 1,
            "restart": 1,
            "other": 0,
        }.items()
    }
    tgts = delta(after, before, [outcome("sift_batch_targets_total", o) for o in TARGET_OUTCOMES])
    expected = {o: 0 for o in TARGET_OUTCOMES} | {
        "ok": 5,  # a×2, b, d's first, f
        "upstream_4xx": 1,
        "upstream_5xx": 1,
        "blocked": 1,
    }
    assert tgts == {outcome("sift_batch_targets_total", o): float(n) for o, n in expected.items()}
    counts = delta(after, before, [plain(f"{h}_count") for h in HISTOGRAMS])
    assert counts == {
        plain("sift_batch_job_seconds_count"): 4.0,  # the jobs whose last target ended them
        plain("sift_batch_target_seconds_count"): 8.0,  # every stored target
        plain("sift_batch_result_bytes_count"): 5.0,  # every stored result
    }
    inf = delta(after, before, [("sift_batch_target_seconds_bucket", (("le", "+Inf"),))])
    assert list(inf.values()) == [8.0]
    assert (
        after[plain("sift_batch_result_bytes_sum")] > before[plain("sift_batch_result_bytes_sum")]
    )
    assert after[plain("sift_batch_queue_depth")] == 0
    assert after[plain("sift_batch_targets_inflight")] == 0


def test_no_url_or_test_site_host_ever_appears_in_the_metrics_text(sift, site, tag):
    paths = [f"/article/8?t={tag}", f"/to-blocked?t={tag}", f"/status/418?t={tag}"]
    _, sub = sift.submit([site.url(p) for p in paths], who="bob")
    wait_for_job_status(sift, sub["job_id"], who="bob")
    sift.call("POST", "/v1/fetch", {"url": site.url(f"/status/502?t={tag}")})
    sift.call("POST", "/v1/fetch", {"url": f"http://127.0.0.1:22/?t={tag}"})
    text = sift.metrics_text()
    assert 'outcome="blocked"' in text
    for needle in (site.host, "127.0.0.1", "127.0.0.2", tag, "/article", "/status", "blocked?"):
        assert needle not in text


def test_fetch_series_count_interactive_fetches_by_outcome(sift, site, tag):
    fetches = {
        "ok": [f"/article/9?t={tag}", f"/article/9?t={tag}"],
        "upstream_4xx": [f"/status/404?t={tag}"],
        "upstream_5xx": [f"/status/503?t={tag}"],
        "unsupported": [f"/image.png?t={tag}"],
    }
    before = scrape(sift)
    for paths in fetches.values():
        for path in paths:
            sift.call("POST", "/v1/fetch", {"url": site.url(path)})
    assert sift.call("POST", "/v1/fetch", {"url": "http://127.0.0.1:22/"})[0] == 422
    assert sift.call("POST", "/v1/fetch", {"mode": "clean"})[0] == 400
    url = site.url("/article/9")
    assert http("POST", sift.base + "/v1/fetch", {"url": url}, key="sk-unknown")[0] == 401
    after = scrape(sift)
    expected = {o: len(p) for o, p in fetches.items()} | {"blocked": 1, "invalid": 1}
    keys = [outcome("sift_fetch_requests_total", o) for o in (*TARGET_OUTCOMES, "invalid")]
    got = {k[1][0][1]: v for k, v in delta(after, before, keys).items() if v}
    assert got == {o: float(n) for o, n in expected.items()}
    assert delta(after, before, [plain("sift_fetch_seconds_count")]) == {
        plain("sift_fetch_seconds_count"): float(sum(expected.values()))
    }
    hits = delta(after, before, [plain("sift_fetch_cache_hits_total")])
    assert list(hits.values()) == [1.0]
    # interactive fetches are not batch targets
    batch = delta(after, before, [outcome("sift_batch_targets_total", o) for o in TARGET_OUTCOMES])
    assert set(batch.values()) == {0.0}


async def test_unknown_outcomes_fold_to_other(state_dir):
    jobs, targets = (series.KNOWN[n] for n in (series.JOBS_TOTAL, series.TARGETS_TOTAL))
    assert series.fold("exploded", jobs) == "other"
    assert series.fold("http://127.0.0.1/x", targets) == "other"
    assert series.fold("ok", targets) == "ok"
    store = open_store(config.from_dict({"store": {"state_dir": str(state_dir)}}))
    try:
        db = Database(store.path)
        db.write(lambda c: counters.bump(c, series.TARGETS_TOTAL, "http://127.0.0.1/x"))
        db.write(lambda c: counters.bump(c, series.JOBS_TOTAL, "exploded"))
        db.close()
        metrics = ApiMetrics()
        metrics.observe_fetch("exploded", 0.1)
        text = metrics.render(await store.batch_series()).decode()
    finally:
        store.close()
    samples = {
        (s.name, s.labels.get("outcome")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    assert samples[("sift_batch_targets_total", "other")] == 1
    assert samples[("sift_batch_jobs_total", "other")] == 1
    assert samples[("sift_fetch_requests_total", "other")] == 1
    assert "exploded" not in text and "127.0.0.1" not in text
