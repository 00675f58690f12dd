"""Reading a JSON request body with a hard size cap and clear 400/413/415 errors.

The body arrives as sent (the app turns aiohttp's own decoding off) and is decoded here: as
is, `gzip` or `deflate`, counted against the cap after decoding, so a small compressed body
cannot expand past it. Other encodings are a 415 that names them.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson
from aiohttp import web

from sift.errors import BadRequest, PayloadTooLarge, UnsupportedEncoding

READ_CHUNK = 65536
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


async def read_json(request: web.Request, cap: int) -> dict[str, Any]:
    """The body as a JSON object; never holds more than `cap` + 1 decoded bytes."""
    if request.content_length is not None and request.content_length > cap:
        raise PayloadTooLarge(f"request body is over {cap // 1024} KiB")
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
    text = b"".join(chunks)
    if not text.strip():
        raise BadRequest("request body is empty; expected a JSON object")
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


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
        self._z = zlib.decompressobj(_WBITS[self.coding]) if self.coding else None
        self._fed = False

    def feed(self, raw: bytes, room: int) -> bytes:
        """Decoded bytes of `raw`, at most `room` of them (more means the cap is passed)."""
        if self._z is None:
            return raw
        first = not self._fed
        self._fed = True
        try:
            out = self._z.decompress(raw, max(room, 1))
        except zlib.error as e:
            if not (first and self.coding == "deflate"):
                raise self._unreadable(e) from None
            # "deflate" without its zlib wrapper, as some clients send it.
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            try:
                out = self._z.decompress(raw, max(room, 1))
            except zlib.error as e2:
                raise self._unreadable(e2) from None
        if self._z.unconsumed_tail:  # more output than room: over the cap
            return out + b"\0"
        return out

    def end(self) -> bytes:
        if self._z is None or not self._fed:
            return b""
        if not self._z.eof:
            raise BadRequest(f"request body could not be read: truncated {self.coding} stream")
        if self._z.unused_data.strip():
            raise BadRequest(f"request body could not be read: data after the {self.coding} stream")
        return b""

    def _unreadable(self, e: zlib.error) -> BadRequest:
        return BadRequest(f"request body could not be read: not valid {self.coding} ({e})")


def _reason(e: web.RequestPayloadError) -> str:
    cause = e.__cause__
    text = getattr(cause, "message", None) or str(cause or e)
    return " ".join(str(text).split())[:200] or "malformed payload"
