"""The drain's guarantees with the real processes (docs/WORKER.md §The scheduler's guarantees):
the rules the simulation checks (tests/unit/test_worker_simulation.py), on a real worker
fetching a real site over loopback."""

from __future__ import annotations

import time

import pytest

from tests.e2e.procs import wait_for_job_status, wait_until

pytestmark = pytest.mark.e2e


def started_at(site, tag: str) -> float:
    wait_until(lambda: any(tag in p for _, p in site.hit_at), what=f"{tag} fetched", timeout=30)
    return next(t for t, p in site.hit_at if tag in p)


def other_host(site, path: str) -> str:
    """The same site under another host name: another host for the gates and the waits."""
    return f"http://localhost:{site.port}{path}"


def test_a_job_held_by_its_own_handed_off_target_never_idles_the_drain(fresh, site, tag):
    """Guarantee 1 (work-conserving), the defect's shape: bob has used the drain for seconds;
    alice's slow target is handed off and her first job waits for it; her other job and bob's
    ready targets (on a host with room) start at once, not when the slow target ends."""
    procs = fresh(batch={"drain_tasks": 1, "jobs_per_caller": 8})
    _, used = procs.submit([site.url(f"/slow?s=0.9&{tag}=u{i}") for i in range(3)], who="bob")
    wait_for_job_status(procs, used["job_id"], who="bob")
    _, a = procs.submit([site.url(f"/slow?s=6&{tag}=a0"), site.url(f"/article/1?{tag}=a1")])
    slow_start = started_at(site, f"{tag}=a0")
    time.sleep(0.5)  # the slow target is handed off by now (hand_off_after 0.25 s)
    submitted = time.monotonic()
    _, a2 = procs.submit([other_host(site, f"/article/2?{tag}=c{i}") for i in range(2)])
    _, b = procs.submit([other_host(site, f"/slow?s=0.3&{tag}=b{i}") for i in range(3)], who="bob")
    for first in (f"{tag}=c0", f"{tag}=b0"):
        at = started_at(site, first)
        assert at - submitted < 2.0 and at < slow_start + 6, f"{first} waited for a0"
    assert wait_for_job_status(procs, b["job_id"], who="bob")["status"] == "done"
    for job in (a, a2):
        assert wait_for_job_status(procs, job["job_id"])["status"] == "done"


def test_two_callers_with_equal_history_alternate_exactly(fresh, site, tag):
    """Guarantee 3: the seed's round robin, a1 b1 a2 b2 …, with the real worker, while the
    slow lane has no place (with one, a target yields its task at once and the order of the
    ends decides)."""
    procs = fresh(batch={"drain_tasks": 1, "slow_targets": 1, "jobs_per_caller": 8})
    # A third caller's job first warms what a first target would pay for once (the render
    # child's first page, the connection, the host's robots.txt): equal history means equal
    # costs, every target within one quantum.
    _, warm = procs.submit([site.url(f"/article/{i}?{tag}=w{i}") for i in range(2)], who="spy")
    wait_for_job_status(procs, warm["job_id"], who="spy")
    # The spy's slow target, on another host, moves to the lane's one place when alice's job
    # comes, and stays there.
    procs.submit([other_host(site, f"/slow?s=15&{tag}=z")], who="spy")
    started_at(site, f"{tag}=z")
    _, a = procs.submit([site.url(f"/article/{i}?{tag}=a{i}") for i in range(4)], who="alice")
    _, b = procs.submit([site.url(f"/article/{i}?{tag}=b{i}") for i in range(4)], who="bob")
    for job, who in ((a, "alice"), (b, "bob")):
        assert wait_for_job_status(procs, job["job_id"], who=who)["status"] == "done"
    order = [p.split(f"{tag}=", 1)[1] for _, p in site.hit_at if f"{tag}=" in p]
    assert order[3:] == ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3"]


def test_on_two_boxes_a_ready_job_starts_while_another_boxs_slow_target_runs(pg_server, site, tag):
    """Guarantee 1 across workers (engine postgres): alice's slow target runs on one box; bob's
    job, submitted to the other box, on a host with room, starts within the wake latency (a
    nudge, else `poll_interval`), and alice's other job does not wait for her slow target."""
    from tests.e2e.procs import SiftProcs

    dsn = pg_server.fresh_database()
    store = {"engine": "postgres", "dsn": dsn}
    batch = {"drain_tasks": 1, "jobs_per_caller": 8, "poll_interval": "1s"}
    ports = [site.port, site.blocked_port]
    a = SiftProcs(ports, batch=batch, store=store)
    b = SiftProcs(ports, batch=batch, store=store, keys_from=a)
    try:
        a.start()
        b.start()
        _, slow = a.submit([site.url(f"/slow?s=8&{tag}=a0"), site.url(f"/article/1?{tag}=a1")])
        slow_start = started_at(site, f"{tag}=a0")
        time.sleep(0.5)
        submitted = time.monotonic()
        _, other = a.submit([other_host(site, f"/article/3?{tag}=c{i}") for i in range(2)])
        _, bob = b.submit(
            [other_host(site, f"/slow?s=0.2&{tag}=b{i}") for i in range(3)], who="bob"
        )
        for first in (f"{tag}=c0", f"{tag}=b0"):
            at = started_at(site, first)
            assert at - submitted < 2.5 and at < slow_start + 8, f"{first} waited for a0"
        assert wait_for_job_status(b, bob["job_id"], who="bob")["status"] == "done"
        for job in (slow, other):
            assert wait_for_job_status(a, job["job_id"], timeout=30)["status"] == "done"
    finally:
        b.close()
        a.close()


BATCH = {"drain_tasks": 1, "jobs_per_caller": 8}
# Room for both of bob's slow targets on one host (batch work leaves a host's last slot free).
ROOMY = {"per_host": 8, "global": 16}


def hits(site, tag: str) -> list[tuple[float, str]]:
    return [(t, p.split(f"{tag}=", 1)[1]) for t, p in site.hit_at if f"{tag}=" in p]


def warmed(procs, site, tag: str) -> None:
    """A third caller's page first: the render child's start, the connection and robots.txt
    are paid before the measured jobs, so alice's pages stay under `hand_off_after` (her own
    hand-off would put her behind too)."""
    _, warm = procs.submit([other_host(site, f"/article/9?{tag}=w")], who="spy")
    wait_for_job_status(procs, warm["job_id"], who="spy")


def test_a_callers_second_slow_target_does_not_start_while_another_caller_is_ready(
    fresh, site, tag
):
    """Guarantee 7, the hostile load's shape (docs/BENCHMARKS.md §Hostile load): bob's slow
    target m0 is handed off; his next slow target m1 starts only after every one of alice's
    ready pages, not between them. The earlier order let it start while m0 had cost one
    quantum (its first half second), level with alice, and hold the only drain task."""
    procs = fresh(batch=BATCH, gates=ROOMY)
    warmed(procs, site, tag)
    _, a = procs.submit([other_host(site, f"/article/{i}?{tag}=a{i}") for i in range(8)])
    _, m0 = procs.submit([site.url(f"/slow?s=8&{tag}=m0")], who="bob")
    _, m1 = procs.submit([site.url(f"/slow?s=3&{tag}=m1")], who="bob")
    for job, who in ((a, "alice"), (m0, "bob"), (m1, "bob")):
        assert wait_for_job_status(procs, job["job_id"], who=who, timeout=40)["status"] == "done"
    order = [name for _, name in sorted(hits(site, tag)) if name != "w"]
    assert order.index("m1") > max(order.index(f"a{i}") for i in range(8)), order


def test_a_callers_second_slow_target_is_handed_off_when_another_caller_arrives(fresh, site, tag):
    """Guarantee 7: bob's second slow target started while nobody else was ready, so it holds
    the only drain task; when alice's job comes it goes to the slow lane's free place within
    `hand_off_after` and her pages start (the earlier lane, one per caller, kept it there)."""
    procs = fresh(batch=BATCH, gates=ROOMY)
    warmed(procs, site, tag)
    _, m0 = procs.submit([site.url(f"/slow?s=8&{tag}=m0")], who="bob")
    started_at(site, f"{tag}=m0")
    _, m1 = procs.submit([site.url(f"/slow?s=6&{tag}=m1")], who="bob")
    m1_start = started_at(site, f"{tag}=m1")
    time.sleep(1.0)  # m1 is past `hand_off_after` with nobody else ready: still on its task
    submitted = time.monotonic()
    _, a = procs.submit([other_host(site, f"/article/{i}?{tag}=a{i}") for i in range(3)])
    at = started_at(site, f"{tag}=a0")
    assert at - submitted < 3.0 and at < m1_start + 6, "alice's job waited for m1"
    for job, who in ((a, "alice"), (m0, "bob"), (m1, "bob")):
        assert wait_for_job_status(procs, job["job_id"], who=who, timeout=40)["status"] == "done"


def test_a_target_yields_the_drain_task_at_once_to_another_callers_job(fresh, site, tag):
    """Guarantee 7 (docs/WORKER.md §Handing off slow targets): with `hand_off_after` far
    off, bob's slow target, alone on the only drain task, moves to the slow lane as soon as
    alice's job comes, and her pages start at once, not when it ends (the earlier drain kept
    it on its task for `hand_off_after`)."""
    procs = fresh(batch={**BATCH, "hand_off_after": "60s"}, gates=ROOMY)
    warmed(procs, site, tag)
    _, m0 = procs.submit([site.url(f"/slow?s=8&{tag}=m0")], who="bob")
    m0_start = started_at(site, f"{tag}=m0")
    time.sleep(0.5)
    submitted = time.monotonic()
    _, a = procs.submit([other_host(site, f"/article/{i}?{tag}=a{i}") for i in range(3)])
    assert wait_for_job_status(procs, a["job_id"], timeout=20)["status"] == "done"
    last = max(t for t, name in hits(site, tag) if name.startswith("a"))  # her last start
    assert last - submitted < 4.0 and last < m0_start + 8, "alice's job waited for m0"
    assert wait_for_job_status(procs, m0["job_id"], who="bob", timeout=40)["status"] == "done"
