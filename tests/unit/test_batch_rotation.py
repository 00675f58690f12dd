"""The rotation of live jobs (docs/WORKER.md §Rotation and drain) as plain data."""

from __future__ import annotations

from sift.batch import Rotation


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


def test_refresh_keeps_the_turn_order_drops_finished_jobs_and_appends_new_ones():
    rot = Rotation()
    rot.replace(["a", "b", "c"])
    rot.taken("a")  # b c a
    assert rot.replace(["a", "c", "d"])  # b finished, d submitted
    assert rot.candidates() == ["c", "a", "d"]
    assert not rot.replace(["a", "d"])  # nothing new
    assert rot.candidates() == ["a", "d"]


def test_taking_an_unknown_job_changes_nothing():
    rot = Rotation()
    rot.replace(["a"])
    rot.taken("zz")
    assert rot.candidates() == ["a"]
