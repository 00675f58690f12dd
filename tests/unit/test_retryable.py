"""`retryable` and `retry_after` on every failure (docs/API.md §Retryable failures), and the
upstream's Retry-After header in both forms."""

from __future__ import annotations

import pytest

from sift import errors
from sift.fetch.retry_after import parse_retry_after

NOW = 1_900_000_000.0  # 2030-03-17T17:46:40Z


@pytest.mark.parametrize(
    "err",
    [
        errors.Timeout(),
        errors.Busy(),
        errors.Upstream5xx(),
        errors.UpstreamUnreachable(),
        errors.upstream_error(500),
        errors.upstream_error(408),
        errors.upstream_error(425),
        errors.upstream_error(429),
        errors.Cancelled(),
        errors.BotWall(upstream_status=429),  # a bot wall may let a later try through
    ],
)
def test_timeouts_server_errors_and_busy_are_retryable(err):
    assert err.retryable is True
    assert err.envelope()["retryable"] is True


@pytest.mark.parametrize(
    "err",
    [
        errors.Blocked(),
        errors.Refused(),
        errors.RobotsDisallowed("robots.txt disallows / for this agent"),
        errors.upstream_error(404),
        errors.upstream_error(403),
        errors.upstream_error(410),
        errors.Unsupported(),
        errors.TooLong(),
        errors.InvalidTarget(),
        errors.TooManyRedirects(),
        errors.verdict_error("login_wall"),
        errors.verdict_error("soft_404"),
        errors.verdict_error("empty"),
    ],
)
def test_refusals_and_client_errors_are_not_retryable(err):
    body = err.envelope()
    assert body["retryable"] is False and body["retry_after"] is None


def test_the_robots_outcome_is_a_403():
    err = errors.RobotsDisallowed("robots.txt disallows /private/ for this agent")
    assert (err.status, err.outcome) == (403, "robots")


def test_retry_after_is_rfc3339_utc_on_a_retryable_failure():
    err = errors.upstream_error(503, retry_after=NOW + 120)
    assert err.envelope()["retry_after"] == "2030-03-17T17:48:40Z"


def test_every_failure_envelope_carries_both_fields():
    body = errors.BadRequest("bad").envelope()
    assert body["retryable"] is False and body["retry_after"] is None


def test_retry_after_in_seconds():
    assert parse_retry_after("120", now=NOW, cap=300) == NOW + 120


@pytest.mark.parametrize(
    "value",
    ["Sun, 17 Mar 2030 17:48:20 GMT", "Sunday, 17-Mar-30 17:48:20 GMT", "Sun Mar 17 17:48:20 2030"],
)
def test_retry_after_as_an_http_date_in_each_of_its_three_formats(value):
    assert parse_retry_after(value, now=NOW, cap=300) == NOW + 100


def test_retry_after_is_capped():
    assert parse_retry_after("86400", now=NOW, cap=300) == NOW + 300
    assert parse_retry_after("Sun, 17 Mar 2031 17:48:20 GMT", now=NOW, cap=60) == NOW + 60


def test_a_retry_after_date_in_the_past_means_now():
    assert parse_retry_after("Sun, 17 Mar 2019 17:48:20 GMT", now=NOW, cap=300) == NOW


@pytest.mark.parametrize("value", [None, "", "soon", "-5", "1.5", "x" * 100])
def test_an_unreadable_retry_after_is_ignored(value):
    assert parse_retry_after(value, now=NOW, cap=300) is None
