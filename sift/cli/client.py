"""Every HTTP call the CLI makes, in one place: one function per API route.

They use the standard library's HTTP client with proxies switched off, so the CLI has no
start-up cost beyond Python itself. Each returns the decoded JSON body of a success and raises
`ClientError` (the server's own error line, its status and hint) for anything else.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from sift.constants import DEFAULT_URL

ENV_URL = "SIFT_URL"
ENV_KEY = "SIFT_KEY"


class ClientError(Exception):
    """A request failed; the message is the server's error line."""

    exit_code = 1


class ClientConfigError(ClientError):
    """SIFT_URL or SIFT_KEY is missing or unusable."""

    exit_code = 2


def _endpoint() -> tuple[str, str]:
    url = os.environ.get(ENV_URL) or DEFAULT_URL
    key = os.environ.get(ENV_KEY, "")
    if not key:
        raise ClientConfigError("SIFT_KEY is not set (create a key with 'sift keys add NAME')")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ClientConfigError(f"SIFT_URL {url!r} is not an http(s) URL such as {DEFAULT_URL}")
    return url.rstrip("/"), key


def _job_path(job_id: str, action: str = "") -> str:
    """The job's path, its id quoted so that no character can change the request's route."""
    return "/v1/batch/" + urllib.parse.quote(job_id, safe="") + action


def request(method: str, path: str, body: Any = None, *, timeout: float = 90) -> tuple[int, dict]:
    base, key = _endpoint()
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path,
        data=data,
        method=method,
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            status, payload = resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        status = e.code
        try:
            payload = json.loads(e.read() or b"{}")
        except ValueError:
            payload = {
                "error": f"{base} answered HTTP {e.code} without a Sift error (is SIFT_URL right?)"
            }
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise ClientError(f"cannot reach {base}: {reason}") from None
    except ValueError:
        raise ClientError(f"{base} answered something that is not JSON") from None
    if not isinstance(payload, dict):
        raise ClientError(f"{base} answered something that is not a JSON object")
    return status, payload


def _call(method: str, path: str, body: Any = None, *, ok: int = 200) -> dict:
    status, payload = request(method, path, body)
    if status != ok or payload.get("success") is False:
        msg = payload.get("error") or f"HTTP {status}"
        hint = payload.get("hint")
        raise ClientError(f"{msg} (HTTP {status}{', hint: ' + hint if hint else ''})")
    return payload


def fetch(target: dict) -> dict:
    return _call("POST", "/v1/fetch", target)


def submit(targets: list, *, fresh: bool = False) -> dict:
    body: dict[str, Any] = {"targets": targets}
    if fresh:
        body["fresh"] = True
    return _call("POST", "/v1/batch", body, ok=202)


def job(job_id: str, *, wait: float = 0, results: bool = True) -> dict:
    query = urllib.parse.urlencode({"wait": f"{wait:g}", "results": str(results).lower()})
    return _call("GET", f"{_job_path(job_id)}?{query}")


def cancel(job_id: str) -> dict:
    return _call("DELETE", _job_path(job_id))


def jobs(*, limit: int = 20, cursor: str | None = None) -> dict:
    query = {"limit": str(limit)}
    if cursor:
        query["cursor"] = cursor
    return _call("GET", "/v1/batch?" + urllib.parse.urlencode(query))


def retry(job_id: str, *, only_retryable: bool = False) -> dict:
    return _call("POST", _job_path(job_id, "/retry"), {"only_retryable": only_retryable}, ok=202)
