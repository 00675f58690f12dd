"""sift.client's request rules without a server: where each call goes, the SIFT_URL/SIFT_KEY
defaults, and which exception each failure status raises (docs/CLIENT.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from typing import get_args

import pytest

from sift.client import (
    APIError,
    AuthError,
    BadRequest,
    Busy,
    ConfigError,
    Conflict,
    NotFound,
    calls,
)
from sift.client.errors import api_error
from sift.client.types import TERMINAL, Mode
from sift.constants import DEFAULT_URL
from sift.fetch.target import MODES


def test_the_url_defaults_to_the_local_bind_and_the_key_to_sift_key(monkeypatch):
    monkeypatch.delenv("SIFT_URL", raising=False)
    monkeypatch.setenv("SIFT_KEY", "sk-sift-abc")
    assert calls.endpoint() == calls.Endpoint(DEFAULT_URL, "sk-sift-abc")


def test_arguments_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("SIFT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SIFT_KEY", "env-key")
    ep = calls.endpoint("http://127.0.0.1:9/", "arg-key")
    assert ep == calls.Endpoint("http://127.0.0.1:9", "arg-key")


def test_a_missing_key_is_a_config_error_saying_how_to_make_one(monkeypatch):
    monkeypatch.delenv("SIFT_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"SIFT_KEY is not set.*sift keys add"):
        calls.endpoint("http://127.0.0.1:8077")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1", "127.0.0.1:8077", "http://", "http://h:99999"])
def test_a_url_that_is_not_http_is_a_config_error(url):
    with pytest.raises(ConfigError, match="SIFT_URL"):
        calls.endpoint(url, "k")


def test_a_job_id_is_quoted_so_it_cannot_change_the_route():
    assert calls.batch_cancel("../fetch?x").path == "/v1/batch/..%2Ffetch%3Fx"
    assert calls.batch_retry("a/b", False).path == "/v1/batch/a%2Fb/retry"
    with pytest.raises(ValueError):
        calls.batch_cancel("")


def test_url_strings_become_targets_and_unset_options_are_not_sent():
    body = calls.batch_submit(["http://a/", {"url": "http://b/", "mode": None, "grep": "x"}], False)
    assert body.body == {"targets": [{"url": "http://a/"}, {"url": "http://b/", "grep": "x"}]}
    assert calls.batch_submit(["http://a/"], True).body["fresh"] is True
    with pytest.raises(TypeError, match="target 0"):
        calls.batch_submit([42], False)


def test_fetch_sends_only_the_options_given():
    call = calls.fetch("http://a/", {"mode": "text", "question": None, "recover": False})
    assert call.body == {"url": "http://a/", "mode": "text", "recover": False}


def test_a_status_wait_outside_0_to_60_seconds_is_refused_before_sending():
    assert calls.batch_status("j", 60, True).held == 60
    with pytest.raises(ValueError, match="wait"):
        calls.batch_status("j", 61, True)


def test_retry_sends_a_body_only_for_only_retryable():
    assert calls.batch_retry("j", False).body is None
    assert calls.batch_retry("j", True).body == {"only_retryable": True}


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequest),
        (401, AuthError),
        (404, NotFound),
        (409, Conflict),
        (429, Busy),
        (503, Busy),
        (502, APIError),
        (422, APIError),
    ],
)
def test_each_failure_status_raises_its_exception_carrying_error_and_hint(status, cls):
    body = {"success": False, "error": "upstream answered HTTP 404", "hint": "recover"}
    err = api_error(status, body, "2")
    assert type(err) is cls and isinstance(err, APIError)
    assert (err.status, err.error, err.hint, err.body) == (status, body["error"], "recover", body)
    assert err.retry_after == 2.0
    assert str(err) == f"upstream answered HTTP 404 (HTTP {status}, hint: recover)"


def test_importing_the_package_defers_the_http_library_until_a_name_is_used():
    """The CLI's help and local verbs import the errors without paying for aiohttp."""
    code = (
        "import sys, sift.client, sift.client.errors; a = 'aiohttp' in sys.modules; "
        "sift.client.Client; print(a, 'aiohttp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_the_typed_modes_and_terminal_statuses_are_the_servers():
    assert get_args(Mode) == MODES
    assert set(TERMINAL) == {"done", "partial", "failed", "cancelled"}


def test_the_client_loads_no_server_module():
    """A program that only calls Sift imports the client, the contract numbers and the status
    names, and nothing of the server (docs/ARCHITECTURE.md §Module map)."""
    code = (
        "import sys; from sift.client import AsyncClient, Client, TERMINAL; "
        "print(sorted(m for m in sys.modules if m.startswith('sift')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(out.stdout))
    assert loaded - {"sift", "sift.constants", "sift.status"} == {
        f"sift.client{m}" for m in ("", ".aio", ".calls", ".errors", ".sync", ".types")
    }


def test_every_exported_name_resolves():
    import sift.client

    assert all(getattr(sift.client, name) is not None for name in sift.client.__all__)
