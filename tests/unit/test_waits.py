"""Why a pending target waits and the job's eta, as pure functions of what the store records
(docs/API.md §Waiting targets): the first reason that applies wins, in the documented order."""

from __future__ import annotations

from sift.batch import waits
from sift.store import Job, TargetRow
from sift.store.records import WaitFacts

NOW = 1_700_000_000.0


def job(started_at=None, status="running") -> Job:
    return Job("j", "alice", "fleet", "k", status, "", 3, 0, NOW - 60, NOW, 0, started_at)


def row(idx, status="pending", host="a.test") -> TargetRow:
    return TargetRow("j", idx, f"http://{host}/p{idx}", "{}", status, None, None, None)


def why(targets, facts=None, *, worker_up=True) -> dict[int, tuple]:
    got = waits.explain(targets, facts or WaitFacts({}), now=NOW, worker_up=worker_up)
    return {i: (w.reason, w.until) for i, w in got.items()}


def test_without_a_worker_every_pending_target_waits_for_one():
    assert why([row(0), row(1)], worker_up=False) == {
        0: ("worker_down", None),
        1: ("worker_down", None),
    }


def test_the_targets_after_the_jobs_next_one_wait_their_turn():
    facts = WaitFacts({0: (NOW + 5, "retry_after"), 1: (None, None)})
    assert why([row(0), row(1)], facts) == {0: ("retry_after", NOW + 5), 1: ("turn", None)}
    assert why([row(0, "done"), row(1, "running"), row(2)]) == {2: ("turn", None)}


def test_the_hosts_own_wait_comes_before_the_targets_retry_time():
    facts = WaitFacts({0: (NOW + 2, "host_busy")}, host_waits={"a.test": (NOW + 9, "crawl_delay")})
    assert why([row(0)], facts) == {0: ("crawl_delay", NOW + 9)}


def test_another_batch_fetch_on_the_host_makes_it_busy_else_it_waits_its_turn():
    assert why([row(0)], WaitFacts({}, running_urls=["http://A.test./x"])) == {
        0: ("host_busy", None)
    }
    assert why([row(0)], WaitFacts({}, running_urls=["http://b.test/x"])) == {0: ("turn", None)}


def test_a_reason_given_at_a_put_back_explains_the_wait_only_while_recent():
    recent = WaitFacts({0: (NOW - 3, "host_busy")})
    assert why([row(0)], recent) == {0: ("host_busy", None)}
    old = WaitFacts({0: (NOW - waits.RECENT - 1, "host_busy")})
    assert why([row(0)], old) == {0: ("turn", None)}


def test_the_eta_starts_after_the_next_wait_and_widens_with_other_live_jobs():
    targets = [row(0, "done"), row(1, "done"), row(2)]
    facts = WaitFacts(
        {2: (None, None)}, live_jobs=1, host_waits={"a.test": (NOW + 10, "crawl_delay")}
    )
    waiting = waits.explain(targets, facts, now=NOW, worker_up=True)
    eta = waits.eta(
        job(started_at=NOW - 8), targets, waiting, facts, now=NOW, worker_up=True, per_target_max=30
    )
    assert eta == {"min": 10 + 2, "max": 10 + 8}  # average 4 s: half and twice it, once
    busy = WaitFacts({2: (None, None)}, live_jobs=3, host_waits=facts.host_waits)
    eta = waits.eta(
        job(started_at=NOW - 8), targets, waiting, busy, now=NOW, worker_up=True, per_target_max=30
    )
    assert eta == {"min": 12, "max": 10 + 8 * 3}  # a turn of each of the 2 other jobs


def test_before_any_target_finished_the_eta_is_bounded_by_the_longest_target():
    targets = [row(0), row(1)]
    facts = WaitFacts({0: (None, None), 1: (None, None)}, live_jobs=1)
    waiting = waits.explain(targets, facts, now=NOW, worker_up=True)
    eta = waits.eta(job(), targets, waiting, facts, now=NOW, worker_up=True, per_target_max=30)
    assert eta == {"min": 0, "max": 60}
    assert (
        waits.eta(job(), targets, waiting, facts, now=NOW, worker_up=False, per_target_max=30)
        is None
    )
