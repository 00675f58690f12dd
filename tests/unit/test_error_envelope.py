"""The failure envelope's own keys belong to the error hierarchy (sift/errors.py, docs/API.md
§Failure envelope): an extra field can add to the envelope, never overwrite it."""

from __future__ import annotations

import pickle

import pytest

from sift.errors import ENVELOPE_KEYS, Conflict, NotFound, upstream_error

# `hint` and `retry_after` are the constructor's own parameters; the rest could only be extras.
_ONLY_AS_EXTRA = sorted(ENVELOPE_KEYS - {"hint", "retry_after"})


@pytest.mark.parametrize("key", _ONLY_AS_EXTRA)
def test_an_extra_field_named_like_an_envelope_key_is_refused_at_construction(key):
    with pytest.raises(TypeError, match=key):
        NotFound("no such job", **{key: "overwritten"})


def test_extra_fields_are_fixed_once_the_error_exists():
    err = Conflict("job already finished: done", status="done")
    with pytest.raises(TypeError):
        err.extra["success"] = True
    assert err.envelope()["success"] is False
    assert err.envelope()["status"] == "done"


def test_an_upstream_error_carries_its_status_as_an_extra_field():
    body = upstream_error(503).envelope()
    assert (body["upstream_status"], body["error"], body["retryable"]) == (
        503,
        "upstream answered HTTP 503",
        True,
    )


def test_an_error_with_extra_fields_survives_a_pickle_round_trip():
    # Render children send their errors back pickled (sift/fetch/renderpool.py).
    err = pickle.loads(pickle.dumps(upstream_error(404)))
    assert (type(err).__name__, err.extra["upstream_status"]) == ("Upstream4xx", 404)
    assert err.envelope()["upstream_status"] == 404


def test_extra_fields_pickle_as_plain_data():
    # The allow-listed unpickler of render replies admits plain data only.
    assert type(pickle.loads(pickle.dumps(NotFound("x", job_id="j").extra))) is dict
