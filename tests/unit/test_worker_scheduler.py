"""The scheduler's decision as a pure function (docs/WORKER.md §The scheduler, §The scheduler's
guarantees). The simulation (test_worker_simulation.py) checks the guarantees over whole runs;
these tests pin each rule of one decision."""

from __future__ import annotations

from worker.fairness import QUANTUM
from worker.scheduler import Job, Running, Skip, Snapshot, decide

A = ("alice", "user")
B = ("bob", "user")
NOW = 100.0


def snap(*jobs: Job, **kw) -> Snapshot:
    return Snapshot(now=NOW, jobs=jobs, vtime=kw.pop("vtime", {}), **kw)


def test_with_nothing_live_nothing_starts():
    d = decide(snap())
    assert d.job_id is None and d.wake_at is None and not d.reasons


def test_new_jobs_of_callers_with_equal_history_go_in_submit_order():
    d = decide(snap(Job("b", B, 2), Job("a", A, 1)))
    assert d.order == ("a", "b") and d.reasons == {"b": Skip.TURN}


def test_ties_go_to_the_caller_whose_last_start_is_oldest():
    jobs = (Job("a", A, 1, turn=3), Job("b", B, 2, turn=4))
    d = decide(snap(*jobs, vtime={A: 1.0, B: 1.0}, caller_turn={A: 3, B: 4}))
    assert d.job_id == "a"


def test_the_caller_with_the_least_virtual_time_goes_first():
    d = decide(snap(Job("a", A, 1), Job("b", B, 2), vtime={A: 2.0, B: 1.0}))
    assert d.job_id == "b"


def test_nobody_counts_below_the_floor():
    d = decide(snap(Job("a", A, 1), Job("b", B, 2), vtime={A: 1.0}, floor=5.0))
    assert d.job_id == "a"  # both at the floor: submit order


def test_a_target_in_flight_counts_what_it_has_run_beyond_its_first_quantum():
    running = (Running(A, NOW - 3.0),)  # 3 s so far: 6 quanta, one charged at its start
    d = decide(snap(Job("a2", A, 1), Job("b", B, 2), vtime={A: 0.5, B: 2.5}, running=running))
    assert d.job_id == "b"


def test_a_job_in_flight_is_never_chosen_and_its_callers_other_job_may_be():
    jobs = (Job("a1", A, 1, in_flight=True), Job("a2", A, 2))
    assert decide(snap(*jobs, vtime={A: 9.0})).order == ("a2",)


def test_round_robin_over_a_callers_jobs():
    jobs = (Job("a1", A, 1, turn=5), Job("a2", A, 2, turn=2), Job("a3", A, 3))
    assert decide(snap(*jobs)).order == ("a3", "a2", "a1")


def test_a_busy_target_waits_for_its_retry_time():
    d = decide(snap(Job("a", A, 1, retry_at=NOW + 2), Job("b", B, 2)))
    assert d.order == ("b",) and d.reasons == {"a": Skip.RETRY_AFTER} and d.wake_at == NOW + 2


def test_a_host_wait_skips_the_job_with_its_reason_and_ends_the_idle_wait():
    jobs = (Job("a", A, 1, host="h1"), Job("b", B, 2, host="h2"))
    waits = {"h1": (NOW + 3, Skip.CRAWL_DELAY), "h2": (NOW + 1, Skip.RETRY_AFTER)}
    d = decide(snap(*jobs, waits=waits))
    assert d.job_id is None and d.wake_at == NOW + 1
    assert d.reasons == {"a": Skip.CRAWL_DELAY, "b": Skip.RETRY_AFTER}


def test_a_past_wait_does_not_skip():
    d = decide(snap(Job("a", A, 1, host="h"), waits={"h": (NOW, Skip.CRAWL_DELAY)}))
    assert d.job_id == "a"


def test_no_room_at_the_gates_skips_only_that_callers_job_on_that_host():
    jobs = (Job("a", A, 1, host="h"), Job("b", B, 2, host="h"))
    d = decide(snap(*jobs, no_room=frozenset({("alice", "h")})))
    assert d.order == ("b",) and d.reasons == {"a": Skip.HOST_BUSY} and d.wake_at is None


def test_a_waiting_job_keeps_its_place():
    jobs = (Job("a", A, 1, host="h"), Job("b", B, 2))
    blocked = decide(snap(*jobs, no_room=frozenset({("alice", "h")})))
    assert blocked.order == ("b",)
    assert decide(snap(*jobs)).order == ("a", "b")  # room again: first, as before


def test_jobs_tried_in_this_scan_are_passed_over():
    d = decide(snap(Job("a", A, 1), Job("b", B, 2), exclude=frozenset({"a"})))
    assert d.order == ("b",) and "a" not in d.reasons


def test_a_caller_one_quantum_ahead_goes_after():
    d = decide(snap(Job("a", A, 1), Job("b", B, 2), vtime={A: QUANTUM}, caller_turn={A: 1}))
    assert d.job_id == "b"


def test_with_several_workers_a_remembered_next_host_lasts_one_refresh():
    """Another worker may take the target whose host this worker remembered: on engine
    postgres the memory ends at the next refresh, so a claim shows the job's next target
    again (found by the simulation: the job was skipped for good)."""
    from worker.state import DrainState

    for shared, kept in ((False, "h"), (True, None)):
        state = DrainState(None, shared=shared)
        state.adopt([("a", "alice", "user")], NOW)
        state.room.remember("a", "alice", "h")
        state.adopt([("a", "alice", "user")], NOW + 1)
        assert state.snapshot(NOW + 1).jobs[0].host == kept
