"""robots.txt, Crawl-delay and Retry-After across the real API and worker processes
(docs/WORKER.md §robots.txt, §Spacing and waits). This module has its own test site, whose
robots.txt each test sets; each test uses fresh processes (a fresh database)."""

from __future__ import annotations

import itertools

from tests.e2e.procs import wait_for_job_status, wait_until


def page_times(site, tag: str) -> list[float]:
    return [t for t, path in site.hit_at if tag in path and not path.startswith("/robots")]


def test_a_disallowed_batch_target_fails_as_robots_and_the_job_goes_on(site, fresh, tag):
    site.robots.update(status=200, body="User-agent: *\nDisallow: /plain.txt\n", delay=0)
    procs = fresh(fetch={"robots": "always"})
    status, sub = procs.submit([site.url(f"/plain.txt?{tag}"), site.url(f"/article/1?{tag}")])
    assert status == 202, sub
    job = wait_for_job_status(procs, sub["job_id"])
    refused, fetched = job["targets"]
    assert job["status"] == "partial"
    assert refused["error"] == "robots.txt disallows /plain.txt for this agent"
    assert (refused["retryable"], refused["retry_after"]) == (False, None)
    assert fetched["status"] == "done"
    assert f"/plain.txt?{tag}" not in site.hits
    # The API process (robots = "always") reads the verdict the worker stored: no second fetch.
    robots_before = site.hits.count("/robots.txt")
    status, body = procs.call("POST", "/v1/fetch", {"url": site.url(f"/plain.txt?{tag}i")})
    assert status == 403 and body["error"].startswith("robots.txt disallows /plain.txt")
    assert site.hits.count("/robots.txt") == robots_before
    assert 'sift_batch_targets_total{outcome="robots"} 1.0' in procs.metrics_text()


def test_crawl_delay_spaces_the_batch_fetches_of_both_drain_tasks(site, fresh, tag):
    site.robots.update(status=200, body="User-agent: *\nCrawl-delay: 1\n", delay=0)
    procs = fresh(batch={"workers": 2, "jobs_per_caller": 4})
    ids = []
    for j in range(2):
        urls = [site.url(f"/article/{i}?{tag}j{j}") for i in range(2)]
        status, sub = procs.submit(urls)
        assert status == 202, sub
        ids.append(sub["job_id"])
    for job_id in ids:
        assert wait_for_job_status(procs, job_id, timeout=60)["status"] == "done"
    times = page_times(site, tag)
    assert len(times) == 4
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.9, gaps  # never two inside one Crawl-delay, across both tasks


def test_an_interactive_retry_after_holds_back_the_hosts_batch_work(site, fresh, tag):
    site.robots.update(status=404, body="", delay=0)
    procs = fresh()
    status, body = procs.call(
        "POST", "/v1/fetch", {"url": site.url(f"/retry-after/503?after=2&{tag}")}
    )
    assert status == 502 and body["retryable"] is True and body["retry_after"] is not None
    told = page_times(site, tag)[0]
    status, sub = procs.submit([site.url(f"/article/1?{tag}b")])
    assert status == 202, sub
    assert wait_for_job_status(procs, sub["job_id"], timeout=30)["status"] == "done"
    assert page_times(site, f"{tag}b")[0] - told >= 1.5  # the worker honoured the API's answer


def test_a_site_that_says_ai_input_no_fails_batch_targets_as_robots(site, fresh, tag):
    """docs/WORKER.md §Content Signals: obeyed by default for batch, not retryable, the error
    names the signal; interactive fetches follow [fetch] robots (not obeyed by default)."""
    site.robots.update(
        status=200,
        body="User-agent: *\nContent-Signal: search=yes, ai-train=no, ai-input=no\nAllow: /\n",
        delay=0,
    )
    procs = fresh()
    status, sub = procs.submit([site.url(f"/article/1?{tag}")])
    assert status == 202, sub
    job = wait_for_job_status(procs, sub["job_id"])
    (target,) = job["targets"]
    assert (job["status"], target["status"]) == ("failed", "failed")
    assert target["error"].startswith("robots.txt Content-Signal ai-input=no")
    assert (target["retryable"], target["retry_after"]) == (False, None)
    assert f"/article/1?{tag}" not in site.hits
    assert 'sift_batch_targets_total{outcome="robots"} 1.0' in procs.metrics_text()
    status, body = procs.call("POST", "/v1/fetch", {"url": site.url(f"/article/1?{tag}i")})
    assert status == 200, body


def test_content_signals_ignore_fetches_the_page(site, fresh, tag):
    site.robots.update(status=200, body="User-agent: *\nContent-Signal: ai-input=no\n", delay=0)
    procs = fresh(fetch={"content_signals": "ignore"})
    status, sub = procs.submit([site.url(f"/article/2?{tag}")])
    assert status == 202, sub
    assert wait_for_job_status(procs, sub["job_id"])["status"] == "done"


def _waiting(procs, job_id, idx):
    t = procs.job(job_id, query="?results=false")["targets"][idx]
    return t.get("waiting") if t["status"] == "pending" else None


def test_a_target_spaced_by_crawl_delay_says_so_and_until_when(site, fresh, tag):
    """docs/API.md §Waiting targets: the host's own wait, with its cause and its end."""
    site.robots.update(status=200, body="User-agent: *\nCrawl-delay: 4\n", delay=0)
    procs = fresh(fetch={"crawl_delay_max": "10s"})
    status, sub = procs.submit([site.url(f"/article/1?{tag}"), site.url(f"/article/2?{tag}")])
    assert status == 202, sub
    seen = []
    wait_until(
        lambda: (
            seen.append(_waiting(procs, sub["job_id"], 1))
            or (seen[-1] or {}).get("reason") == "crawl_delay"
        ),
        timeout=10,
        what="target 1 waiting for the crawl delay",
    )
    assert seen[-1]["host"] == "127.0.0.1" and seen[-1]["not_before"].endswith("Z")
    job = procs.job(sub["job_id"], query="?results=false")
    assert job["eta"]["min"] >= 1 and job["eta"]["max"] >= job["eta"]["min"]
    assert wait_for_job_status(procs, sub["job_id"], timeout=30)["status"] == "done"


def test_a_host_told_to_retry_after_makes_batch_targets_wait_with_that_reason(site, fresh, tag):
    site.robots.update(status=404, body="", delay=0)
    procs = fresh()
    status, body = procs.call(
        "POST", "/v1/fetch", {"url": site.url(f"/retry-after/503?after=4&{tag}")}
    )
    assert status == 502 and body["retry_after"] is not None
    status, sub = procs.submit([site.url(f"/article/1?{tag}b")])
    assert status == 202, sub
    seen = []
    wait_until(
        lambda: seen.append(_waiting(procs, sub["job_id"], 0)) or seen[-1] is not None,
        timeout=10,
        what="the target pending with a reason",
    )  # (between a claim and its put-back it is running)
    assert (seen[-1]["reason"], seen[-1]["not_before"]) == ("retry_after", body["retry_after"])
