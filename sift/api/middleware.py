"""The one error middleware and the auth middleware (which also keeps the per-key request
rate, docs/GATES.md §Request rate per key: after the key lookup, before any other work).

Every `SiftError` becomes the JSON failure envelope with its own status, and aiohttp's own HTTP
errors (404 for an unknown route, 405, 413…) become JSON too, so a caller never sees an HTML
page. An unexpected exception is a 500 with a generic message; its text is never echoed.
"""

from __future__ import annotations

import logging

import orjson
from aiohttp import web

from sift.api.appkeys import CALLER, CLOCK, KEYS, METRICS, RATE
from sift.errors import RateLimited, SiftError, Unauthorized
from sift.gates.rate import retry_in

log = logging.getLogger("sift.api")

PUBLIC_PATHS = frozenset({"/healthz", "/metrics", "/v1/openapi.json"})


def json_response(body: dict, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(body), status=status, content_type="application/json", headers=headers
    )


def error_response(err: SiftError) -> web.Response:
    wait = err.wait if isinstance(err, RateLimited) else 2
    headers = {"Retry-After": str(wait)} if err.status in (429, 503) else None
    if err.status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return json_response(err.envelope(), err.status, headers)


@web.middleware
async def errors(request: web.Request, handler):
    try:
        return await handler(request)
    except SiftError as e:
        if isinstance(e, RateLimited) and METRICS in request.app:
            request.app[METRICS].observe_refused(e.outcome)
        return error_response(e)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        msg = {404: "no such route", 405: "method not allowed", 413: "request body too large"}.get(
            e.status, e.reason
        )
        allow = {"Allow": e.headers["Allow"]} if "Allow" in e.headers else None
        return json_response({"success": False, "error": msg}, e.status, allow)
    except Exception as e:
        log.error(
            "internal error",
            extra={"fields": {"error_type": type(e).__name__, "path": request.path}},
            exc_info=e,
        )
        body = {"success": False, "error": "internal error", "hint": "retry"}
        return json_response({**body, "retryable": True, "retry_after": None}, 500)


@web.middleware
async def auth(request: web.Request, handler):
    if request.path in PUBLIC_PATHS or not request.path.startswith("/v1/"):
        return await handler(request)
    caller = request[CALLER] = _caller(request, "unknown API key")
    now = request.app[CLOCK]()
    wait = request.app[RATE].take(caller.identity, now)
    if wait is not None:
        raise RateLimited(retry_in(wait), now)
    return await handler(request)


def recheck(request: web.Request) -> None:
    """After a request was held (a long-poll), its key must still be valid: a key revoked
    meanwhile gets 401, not the answer (docs/SECURITY.md §Auth)."""
    if _caller(request, "API key revoked while the request was held") != request[CALLER]:
        raise Unauthorized("API key revoked while the request was held")


def _caller(request: web.Request, unknown: str):
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    caller = request.app[KEYS].lookup(key.strip())
    if caller is None:
        raise Unauthorized(unknown)
    return caller
