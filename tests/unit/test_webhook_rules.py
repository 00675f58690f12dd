"""The webhook delivery rules (docs/API.md §Webhooks) as pure functions."""

from __future__ import annotations

import random

import pytest

from sift.store import webhook_rules as rules


def test_a_webhook_asks_for_terminal_events_by_default_and_target_events_on_request():
    assert set(rules.expand(None)) == {"job.done", "job.partial", "job.failed", "job.cancelled"}
    assert rules.expand(["target.*"]) == ("target.done", "target.failed")
    assert "job.running" in rules.expand(["*"])
    with pytest.raises(ValueError, match=r"unknown event 'target\.started'"):
        rules.expand(["target.started"])


def test_six_tries_spread_over_about_an_hour_with_jitter():
    rng = random.Random(7)
    now, times = 0.0, [0.0]
    for attempts in range(1, rules.TRIES + 1):
        nxt = rules.next_try(attempts, now, rng=rng)
        if nxt is None:
            break
        times.append(nxt)
        now = nxt
    assert len(times) == rules.TRIES == 6
    assert 0.8 * 3600 <= times[-1] <= 1.25 * 3600
    waits = {rules.next_try(1, 0.0, rng=rng) for _ in range(20)}
    assert len(waits) > 1 and all(8.0 <= w <= 12.0 for w in waits)


def test_a_receivers_retry_after_is_honoured_up_to_an_hour():
    assert rules.next_try(1, 100.0, retry_after=120.0) >= 220.0
    assert rules.next_try(1, 0.0, retry_after=10 * 86400) <= rules.RETRY_AFTER_MAX


def test_answers_map_to_outcomes():
    assert rules.outcome_of(204) == "delivered"
    assert rules.outcome_of(410) == "gone"
    assert rules.outcome_of(503) == rules.outcome_of(0) == rules.outcome_of(301) == "retry"
    assert rules.outcome_of(200, refused=True) == "refused"
