"""A hostile document fails only its own target (docs/SECURITY.md §Limits and isolation).

Real processes, a loopback site serving the bombs of `tests/bombs.py`: a PDF whose one stream
inflates to 100 MiB, a 2.3 MiB page of empty paragraphs, and a heavy grep over a long page.
The API and the worker stay up and within their memory goals, the bomb's target fails with a
413 / 504-class error, and another caller's work goes on meanwhile.
"""

from __future__ import annotations

import ipaddress
import time

import pytest

from tests.bombs import HEAVY_GREP
from tests.e2e.procs import wait_for_job_status
from tests.robustness.helpers import at_once, configure, proc_memory

pytestmark = pytest.mark.e2e

API_RSS_MAX = 150 * 1024 * 1024
WORKER_RSS_MAX = 200 * 1024 * 1024


def rss(pid: int) -> int:
    return proc_memory(pid, "VmHWM")  # the peak, so a spike between samples still counts


@pytest.fixture
def pair(fresh):
    procs = fresh(start=False)
    # Time and isolation are what this file checks: the 9.5 MiB haystack's grep needs more than
    # the render pool's default budget and would fail 413 before its time (docs/SECURITY.md
    # §The render pool's memory budget; tests/attack/test_render_memory.py checks that).
    configure(procs, render={"timeout": "4s", "pool_memory": "1GiB"}, gates={"per_host": 8})
    return procs.start()


def test_a_pdf_bomb_is_413_and_the_api_stays_up_within_its_memory(pair, site):
    status, body = pair.call("POST", "/v1/fetch", {"url": site.url("/hostile/pdf")}, timeout=60)
    assert status == 413, body
    assert "pdf_stream_max" in body["error"]
    assert pair.api.alive()
    assert rss(pair.api.pid) < API_RSS_MAX
    status, body = pair.call("POST", "/v1/fetch", {"url": site.url("/article/1")})
    assert status == 200, body


def test_an_html_bomb_is_413_and_the_api_stays_up_within_its_memory(pair, site):
    status, body = pair.call("POST", "/v1/fetch", {"url": site.url("/hostile/html")}, timeout=60)
    assert status in (413, 504), body
    assert "[render]" in body["error"]
    assert pair.api.alive()
    assert rss(pair.api.pid) < API_RSS_MAX


def test_a_bomb_in_a_batch_fails_its_target_and_no_other_callers_job(pair, site, tag):
    other_urls = [site.url(f"/article/{n}?t={tag}") for n in range(6)]
    status, other = pair.submit(other_urls, who="bob")
    assert status == 202, other
    status, job = pair.submit(
        [site.url(f"/hostile/pdf?t={tag}"), site.url(f"/hostile/html?t={tag}"), other_urls[0]]
    )
    assert status == 202, job
    worker_pid = pair.worker.pid
    mine = wait_for_job_status(pair, job["job_id"], timeout=90)
    theirs = wait_for_job_status(pair, other["job_id"], who="bob", timeout=90)
    assert mine["status"] == "partial", mine
    failed = [t for t in mine["targets"] if t["status"] == "failed"]
    assert len(failed) == 2 and all("[render]" in t["error"] for t in failed), failed
    assert theirs["status"] == "done", theirs
    assert pair.worker.alive() and pair.worker.pid == worker_pid
    assert rss(worker_pid) < WORKER_RSS_MAX


def test_a_render_past_its_budget_fails_with_timeout(pair, site):
    target = {"url": site.url("/hostile/haystack.txt"), "grep": HEAVY_GREP}
    started = time.monotonic()
    status, body = pair.call("POST", "/v1/fetch", target, timeout=60)
    assert status == 504, body
    assert "[render] timeout" in body["error"]
    assert time.monotonic() - started < 4 * 3  # the budget, not the grep's natural minute


def test_one_callers_heavy_targets_leave_render_children_for_another(pair, site):
    heavy = {"url": site.url("/hostile/haystack.txt"), "grep": HEAVY_GREP}
    calls = [lambda: pair.call("POST", "/v1/fetch", heavy, timeout=60) for _ in range(4)]

    def light():
        time.sleep(0.5)  # the heavy greps hold their children by now
        return pair.call("POST", "/v1/fetch", {"url": site.url("/article/2")}, who="bob")

    answers = at_once([*calls, light])
    heavy_answers, light_answer = answers[:4], answers[4]
    assert light_answer.status == 200, light_answer.body
    assert all(a.status == 504 for a in heavy_answers), [a.body for a in heavy_answers]
    # bob is served while alice's greps still run; alice's last ones wait for her own share.
    assert light_answer.answered_at < min(a.answered_at for a in heavy_answers)


def test_the_units_deny_private_ranges_as_defence_in_depth_but_not_loopback():
    from sift.guard.addresses import why_not_public
    from tests.integration.test_systemd_units import UNITS, one

    for unit in UNITS:
        denied = one(unit, "Service", "IPAddressDeny").split()
        for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"):
            assert net in denied, (unit, net)
        assert all(why_not_public(ipaddress.ip_network(n)[1]) for n in denied)
        assert not any(ipaddress.ip_address("127.0.0.1") in ipaddress.ip_network(n) for n in denied)
