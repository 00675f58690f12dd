"""Logging rules: restricted callers' lines are redacted; batch lines carry ids and counts only."""

from __future__ import annotations

import io
import json
import logging

import pytest

from sift import log as logmod


@pytest.fixture
def captured():
    stream = io.StringIO()
    logmod.setup("debug", "json", stream=stream)
    yield stream
    logging.getLogger().handlers.clear()


def lines(stream):
    return [json.loads(x) for x in stream.getvalue().splitlines()]


def test_restricted_caller_log_lines_carry_no_host_reason_or_error(captured):
    logger = logging.getLogger("sift.fetch")
    logmod.fetch_event(
        logger,
        "fetch failed",
        restricted=True,
        host="secret.example",
        url="http://secret.example/x",
        reason="private",
        error="boom",
        outcome="blocked",
        caller_class="restricted",
    )
    (line,) = lines(captured)
    assert "secret" not in json.dumps(line)
    assert line["outcome"] == "blocked"
    assert not {"host", "url", "reason", "error"} & set(line)


def test_fleet_caller_log_lines_keep_their_detail(captured):
    logmod.fetch_event(
        logging.getLogger("sift.fetch"),
        "fetch failed",
        restricted=False,
        host="a.example",
        error="boom",
    )
    (line,) = lines(captured)
    assert line["host"] == "a.example" and line["error"] == "boom"


def test_batch_log_lines_refuse_urls_and_hosts():
    logger = logging.getLogger("sift.batch")
    with pytest.raises(ValueError):
        logmod.batch_event(logger, "target done", job_id="j", url="http://x/")
    with pytest.raises(ValueError):
        logmod.batch_event(logger, "target done", job_id="j", host="x")


def test_batch_log_lines_carry_job_ids_and_counts(captured):
    logmod.batch_event(logging.getLogger("sift.batch"), "job done", job_id="j1", done=3, total=3)
    (line,) = lines(captured)
    assert (line["job_id"], line["done"], line["total"]) == ("j1", 3, 3)
