"""The engine-independent store rules (sift/store/rules.py) as pure functions, without a
database; the contract suite checks both engines apply them (docs/ARCHITECTURE.md §The
store's surface)."""

from __future__ import annotations

from sift.store import rules
from sift.store.records import Caps, Fetched, NewJob, NewTarget

A, B, C = ("alice", "fleet"), ("bob", "fleet"), ("carol", "fleet")


def held(job_id, owner, nbytes, ended=True):
    return rules.Held(job_id, owner, nbytes, ended)


def test_eviction_takes_the_storing_callers_own_finished_jobs_first_oldest_first():
    jobs = [held("b1", B, 100), held("a1", A, 100), held("a2", A, 100), held("a3", A, 100)]
    assert rules.eviction_victims(jobs, 300, "a3") == ["a1"]


def test_eviction_then_takes_only_from_callers_over_an_equal_share():
    jobs = [held("a1", A, 50), held("b1", B, 300), held("b2", B, 100), held("c1", C, 50)]
    assert rules.eviction_victims(jobs, 300, "c1") == ["b1"]


def test_eviction_never_takes_a_live_job_and_stops_once_under_budget():
    jobs = [held("live", B, 500, ended=False), held("b1", B, 10)]
    assert rules.eviction_victims(jobs, 100, None) == ["b1"]
    assert rules.eviction_victims([held("x", A, 10)], 100, None) == []


def test_submit_refusals_come_in_order_too_many_then_caller_busy_then_jobs_busy():
    job = NewJob("j", "alice", "fleet", "k", [NewTarget("u", "{}")] * 3)
    assert rules.submit_refusal(job, Caps(2, 1, 1), mine=1, total=1) == "too_many"
    assert rules.submit_refusal(job, Caps(3, 1, 1), mine=1, total=1) == "caller_busy"
    assert rules.submit_refusal(job, Caps(3, 2, 1), mine=1, total=1) == "jobs_busy"
    assert rules.submit_refusal(job, Caps(3, 2, 2), mine=1, total=1) is None


def test_a_target_put_back_keeps_nothing_and_a_retry_time_needs_a_retryable_failure():
    back = rules.stored(Fetched("pending", "busy", 1.0, "r", "e", "h", True, 5.0))
    assert back == rules.Stored(None, None, None, None, None, 0, 0)
    failed = rules.stored(Fetched("failed", "timeout", 1.0, None, "e", "retry", False, 5.0))
    assert (failed.retry_after, failed.done, failed.nbytes) == (None, 1, 0)
    done = rules.stored(Fetched("done", "ok", 1.0, "é"))
    assert (done.result, done.nbytes) == ("é", 2)


def test_the_terminal_status_is_done_failed_or_partial():
    assert [rules.terminal_status(f, 2) for f in (0, 1, 2)] == ["done", "partial", "failed"]


def test_the_expiry_test_in_python_and_sql_agree_at_the_boundary():
    assert rules.expires_at(100.0, 50.0) == 150.0
    assert rules.expired_sql("?") == "lease + ? <= ?"
    assert rules.unexpired_sql("%s") == "lease + %s > %s"


def test_the_byte_budget_counts_utf8_bytes_of_ascii_and_other_text():
    assert rules.nbytes(None) == rules.nbytes("") == 0
    assert rules.nbytes('{"content": "plain"}') == 20
    assert rules.nbytes("é€😀") == 2 + 3 + 4
