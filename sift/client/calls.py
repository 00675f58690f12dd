"""Where the client sends each call, as data: the async and sync clients share it.

A `Call` is a route, its JSON body and query, the statuses that mean success, and how long the
server may hold it; `endpoint()` reads SIFT_URL and SIFT_KEY. Keeping this apart from the
transport is what lets the two clients differ only in how they wait.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sift.client.errors import ConfigError
from sift.constants import DEFAULT_URL, WAIT_MAX

KEY_HELP = "create a key with 'sift keys add NAME'"


@dataclass(frozen=True)
class Endpoint:
    base: str  # scheme://host:port, no trailing slash
    key: str


def endpoint(url: str | None = None, key: str | None = None) -> Endpoint:
    """The server and key: the arguments, else SIFT_URL (default the local bind) and SIFT_KEY."""
    url = url or os.environ.get("SIFT_URL") or DEFAULT_URL
    key = key if key is not None else os.environ.get("SIFT_KEY", "")
    if not key:
        raise ConfigError(f"SIFT_KEY is not set ({KEY_HELP})")
    if any(c.isspace() for c in key):
        raise ConfigError("SIFT_KEY contains whitespace; paste the key exactly as printed")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"SIFT_URL {url!r} is not an http(s) URL such as {DEFAULT_URL}")
    return Endpoint(url.strip().rstrip("/"), key)


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    ok: tuple[int, ...] = (200,)
    body: Any = None
    query: Mapping[str, str] | None = None
    held: float = 0.0  # seconds the server may hold the request on purpose (?wait=)
    last_event_id: str | None = None  # an event stream: resume after this id


def _job(job_id: str, suffix: str = "") -> str:
    """The job's path, its id quoted so that no character can change the route."""
    if not isinstance(job_id, str) or not job_id:
        raise ValueError("job_id must be a non-empty string")
    return "/v1/batch/" + urllib.parse.quote(job_id, safe="") + suffix


def _options(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The options that were given: `None` means "the server's default" and is not sent."""
    return {k: v for k, v in fields.items() if v is not None}


def fetch(url: str, options: Mapping[str, Any]) -> Call:
    return Call("POST", "/v1/fetch", body={"url": url, **_options(options)})


def targets(items: Iterable[Any]) -> list[dict[str, Any]]:
    """Targets as objects: a plain URL string becomes `{"url": …}`, `None` options are dropped."""
    out = []
    for i, t in enumerate(items):
        if isinstance(t, str):
            out.append({"url": t})
        elif isinstance(t, Mapping):
            out.append(_options(t))
        else:
            raise TypeError(f"target {i}: expected a URL string or a target dict")
    return out


def batch_submit(items: Iterable[Any], fresh: bool, webhook: Any = None) -> Call:
    body: dict[str, Any] = {"targets": targets(items)}
    if fresh:
        body["fresh"] = True
    if webhook is not None:
        body["webhook"] = webhook
    return Call("POST", "/v1/batch", ok=(202,), body=body)


def batch_events(job_id: str, after: int, results: bool) -> Call:
    """The job's event stream (Server-Sent Events), resumed after event id `after`."""
    query = {"results": "true"} if results else None
    headers_after = str(int(after))
    return Call("GET", _job(job_id, "/events"), query=query, last_event_id=headers_after)


def batch_status(job_id: str, wait: float, results: bool, cursor: str | None = None) -> Call:
    if not 0 <= wait <= WAIT_MAX:
        raise ValueError(f"wait must be from 0 to {WAIT_MAX:g} seconds")
    query = {"wait": f"{wait:g}", "results": "true" if results else "false"}
    if cursor is not None:
        query["cursor"] = cursor
    return Call("GET", _job(job_id), query=query, held=wait)


def batch_list(limit: int | None, cursor: str | None) -> Call:
    return Call("GET", "/v1/batch", query=_options({"limit": limit, "cursor": cursor}) or None)


def batch_cancel(job_id: str) -> Call:
    return Call("DELETE", _job(job_id))


def batch_retry(job_id: str, only_retryable: bool, webhook: Any = None) -> Call:
    body: dict[str, Any] = {"only_retryable": True} if only_retryable else {}
    if webhook is not None:
        body["webhook"] = webhook
    return Call("POST", _job(job_id, "/retry"), ok=(202,), body=body or None)


def health() -> Call:
    return Call("GET", "/healthz")
