"""The per-key request rate's token bucket (docs/GATES.md §Request rate per key), one test per
rule, with an injected `now`."""

from __future__ import annotations

import pytest

from sift.gates.rate import PRUNE_AT, RequestRate, retry_in


def test_a_key_may_make_its_burst_at_once_and_the_next_request_is_refused():
    rate = RequestRate(2, 3)
    assert [rate.take("a", 100.0) for _ in range(3)] == [None, None, None]
    assert rate.take("a", 100.0) == pytest.approx(0.5)


def test_tokens_come_back_at_the_rate_and_never_past_the_burst():
    rate = RequestRate(2, 3)
    for _ in range(3):
        rate.take("a", 100.0)
    assert rate.take("a", 100.25) == pytest.approx(0.25)  # half a token back, half to wait
    assert rate.take("a", 100.5) is None  # one whole token
    assert rate.take("a", 1000.0) is None  # a long pause refills to the burst only
    assert [rate.take("a", 1000.0) for _ in range(3)][-1] is not None


def test_the_retry_after_is_the_time_until_one_token_in_whole_seconds_at_least_one():
    rate = RequestRate(0.5, 1)
    rate.take("a", 0.0)
    wait = rate.take("a", 0.5)  # a quarter token back: three quarters to come at 0.5 a second
    assert wait == pytest.approx(1.5)
    assert retry_in(wait) == 2
    assert retry_in(0.001) == 1
    assert rate.take("a", 0.5 + wait) is None  # waiting as told is admitted


def test_a_refused_request_takes_no_token():
    rate = RequestRate(1, 1)
    rate.take("a", 0.0)
    for _ in range(100):
        assert rate.take("a", 0.5) is not None
    assert rate.take("a", 1.0) is None


def test_each_key_has_its_own_bucket():
    rate = RequestRate(1, 2)
    rate.take("a", 0.0)
    rate.take("a", 0.0)
    assert rate.take("a", 0.0) is not None
    assert rate.take("b", 0.0) is None


def test_a_rate_of_zero_is_no_limit():
    rate = RequestRate(0, 1)
    assert all(rate.take("a", 0.0) is None for _ in range(1000))
    assert len(rate) == 0


def test_full_buckets_are_forgotten_so_memory_stays_bounded():
    rate = RequestRate(10, 5)
    for n in range(PRUNE_AT):
        rate.take(n, 0.0)
    rate.take("busy", 1.0)
    rate.take("busy", 1.0)
    rate.take("late", 10.0)  # every bucket but "busy" has long refilled
    assert len(rate) <= 3
    assert rate.take("busy", 10.0) is None
