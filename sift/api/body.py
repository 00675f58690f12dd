"""Reading a JSON request body with a hard size cap and clear 400/413/415 errors.

The body arrives as sent (the app turns aiohttp's own decoding off) and is decoded here: as
is, `gzip` or `deflate`, counted against the cap after decoding, so a small compressed body
cannot expand past it. Other encodings are a 415 that names them.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

import orjson
from aiohttp import web

from sift.api.appkeys import CONFIG
from sift.errors import BadRequest, PayloadTooLarge, RequestTimeout, UnsupportedEncoding

READ_CHUNK = 65536
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


async def read_json(request: web.Request, cap: int, *, list_ok: bool = False) -> Any:
    """The body as a JSON object (or, with `list_ok`, a list); never holds more than `cap` + 1
    decoded bytes, and waits for it at most `[server] body_timeout` (408 after that)."""
    if request.content_length is not None and request.content_length > cap:
        raise PayloadTooLarge(f"request body is over {cap // 1024} KiB")
    limit = request.app[CONFIG].server.body_timeout
    try:
        async with asyncio.timeout(limit):
            text = await _read(request, cap)
    except TimeoutError:
        raise RequestTimeout(f"the request body did not arrive within {limit:g} s") from None
    if not text.strip():
        raise BadRequest("request body is empty; expected a JSON object")
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"request body is not valid JSON: {e}") from None
    if isinstance(body, list) and list_ok:
        return body
    if not isinstance(body, dict):
        raise BadRequest(f"request body must be a JSON object{' or list' if list_ok else ''}")
    return body


async def _read(request: web.Request, cap: int) -> bytes:
    decoder = _Decoder(request.headers.get("Content-Encoding", ""))
    chunks, size = [], 0
    while True:
        try:
            raw = await request.content.read(READ_CHUNK)
        except web.RequestPayloadError as e:
            raise BadRequest(f"request body could not be read: {_reason(e)}") from None
        chunk = decoder.feed(raw, cap + 1 - size) if raw else decoder.end()
        size += len(chunk)
        if size > cap:
            raise PayloadTooLarge(f"request body is over {cap // 1024} KiB")
        chunks.append(chunk)
        if not raw:
            break
    return b"".join(chunks)


class _Decoder:
    """One Content-Encoding, decoded chunk by chunk with bounded output."""

    def __init__(self, header: str):
        codings = [c.strip().lower() for c in header.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in _WBITS):
            raise UnsupportedEncoding(
                f"Content-Encoding {header.strip()[:60]!r} is not supported; "
                "send the body as is, or with gzip or deflate"
            )
        self.coding = codings[0] if codings else None
        self._z = None
        self._head = b""  # "deflate" waits for two bytes to tell zlib-wrapped from raw

    def feed(self, raw: bytes, room: int) -> bytes:
        """Decoded bytes of `raw`, at most `room` of them (more means the cap is passed)."""
        if self.coding is None:
            return raw
        if self._z is None:
            self._head += raw
            if self.coding == "deflate" and len(self._head) < 2:
                return b""
            raw, self._head = self._head, b""
            self._z = zlib.decompressobj(self._wbits(raw))
        try:
            out = self._z.decompress(raw, max(room, 1))
        except zlib.error as e:
            raise BadRequest(
                f"request body could not be read: not valid {self.coding} ({e})"
            ) from None
        if self._z.unconsumed_tail:  # more output than room: over the cap
            return out + b"\0"
        return out

    def _wbits(self, head: bytes) -> int:
        if self.coding != "deflate":
            return _WBITS[self.coding]
        # RFC 9110's deflate is zlib-wrapped; some clients send the raw stream instead.
        wrapped = head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
        return zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS

    def end(self) -> bytes:
        if self.coding is None or (self._z is None and not self._head):
            return b""
        if self._z is None or not self._z.eof:
            raise BadRequest(f"request body could not be read: truncated {self.coding} stream")
        if self._z.unused_data.strip():
            raise BadRequest(f"request body could not be read: data after the {self.coding} stream")
        return b""


def _reason(e: web.RequestPayloadError) -> str:
    cause = e.__cause__
    text = getattr(cause, "message", None) or str(cause or e)
    return " ".join(str(text).split())[:200] or "malformed payload"
