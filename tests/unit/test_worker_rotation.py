"""The rotation of live jobs (docs/WORKER.md §Rotation and drain) as plain data."""

from __future__ import annotations

from worker.rotation import Rotation


def take_next(rot: Rotation, ready: set[str]) -> str | None:
    for job in rot.candidates():
        if job in ready:
            rot.taken(job)
            return job
    return None


def test_jobs_enter_the_rotation_in_submit_order():
    rot = Rotation()
    rot.replace(["a", "b", "c"])
    assert rot.candidates() == ["a", "b", "c"]


def test_two_jobs_with_one_task_alternate():
    rot = Rotation()
    rot.replace(["a", "b"])
    assert [take_next(rot, {"a", "b"}) for _ in range(4)] == ["a", "b", "a", "b"]


def test_a_job_with_nothing_ready_keeps_its_place_at_the_front():
    rot = Rotation()
    rot.replace(["a", "b", "c"])
    assert take_next(rot, {"b", "c"}) == "b"
    assert take_next(rot, {"b", "c"}) == "c"
    assert take_next(rot, {"a", "b", "c"}) == "a"


def test_refresh_keeps_the_turn_order_drops_finished_jobs_and_adds_new_ones():
    rot = Rotation()
    rot.replace(["a", "b", "c"])
    rot.taken("a")  # b c a
    assert rot.replace(["a", "c", "d"])  # b finished, d submitted
    assert rot.candidates() == ["c", "d", "a"]
    assert not rot.replace(["a", "d"])  # nothing new
    assert rot.candidates() == ["d", "a"]


def test_a_new_job_goes_before_every_job_that_has_had_a_turn():
    rot = Rotation()
    rot.replace(["a"])
    assert take_next(rot, {"a"}) == "a"  # a0 in flight
    rot.replace(["a", "b"])  # b arrives meanwhile
    assert [take_next(rot, {"a", "b"}) for _ in range(4)] == ["b", "a", "b", "a"]


def test_new_jobs_queue_behind_jobs_still_waiting_for_their_first_turn():
    rot = Rotation()
    rot.replace(["a", "b"])
    assert take_next(rot, {"a", "b"}) == "a"  # b c a, b has had no turn
    rot.replace(["a", "b", "c"])
    assert rot.candidates() == ["b", "c", "a"]


def test_taking_an_unknown_job_changes_nothing():
    rot = Rotation()
    rot.replace(["a"])
    rot.taken("zz")
    assert rot.candidates() == ["a"]


def test_a_held_job_is_not_ready_except_for_the_task_holding_it():
    rot = Rotation()
    rot.replace(["a", "b"])
    rot.hold("a")
    assert rot.ready(0.0) == ["b"]
    assert rot.ready(0.0, mine="a") == ["a", "b"]
    rot.release("a")
    assert rot.ready(0.0) == ["a", "b"]


def test_a_waiting_job_is_ready_again_at_its_retry_time_and_ends_with_the_job():
    rot = Rotation()
    rot.replace(["a", "b"])
    rot.wait("a", 10.0)
    assert rot.ready(9.9) == ["b"]
    assert rot.next_retry(after=5.0) == 10.0
    assert rot.next_retry(after=10.0) is None  # already due: tried at that scan
    assert rot.ready(10.0) == ["a", "b"]
    rot.replace(["b"])  # a ended
    assert rot.next_retry(after=0.0) is None


def test_a_claimed_job_is_held_no_longer_waits_and_goes_to_the_back():
    rot = Rotation()
    rot.replace(["a", "b"])
    rot.wait("a", 10.0)
    rot.claimed("a")
    assert rot.candidates() == ["b", "a"]
    assert rot.ready(0.0) == ["b"]
    assert rot.next_retry(after=0.0) is None
