"""Reading a JSON request body with a hard size cap and clear 400/413 errors."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from sift.errors import BadRequest, PayloadTooLarge


async def read_json(request: web.Request, cap: int) -> dict[str, Any]:
    """The body as a JSON object; never reads more than `cap` + 1 bytes."""
    if request.content_length is not None and request.content_length > cap:
        raise PayloadTooLarge(f"request body is over {cap // 1024} KiB")
    chunks, size = [], 0
    while True:
        try:
            chunk = await request.content.read(65536)
        except web.RequestPayloadError as e:  # e.g. not the Content-Encoding it claims
            raise BadRequest(f"request body could not be read: {_reason(e)}") from None
        if not chunk:
            break
        size += len(chunk)
        if size > cap:
            raise PayloadTooLarge(f"request body is over {cap // 1024} KiB")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise BadRequest("request body is empty; expected a JSON object")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def _reason(e: web.RequestPayloadError) -> str:
    cause = e.__cause__
    text = getattr(cause, "message", None) or str(cause or e)
    return " ".join(str(text).split())[:200] or "malformed payload"
