"""A status reply of megabytes is written a slice at a time, and the event loop serves others
between the slices (docs/SECURITY.md §Limits and isolation)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from sift.api.status_reads import SEND_CHUNK, StatusReads
from sift.config import ServerConfig


async def test_a_big_status_reply_gives_the_event_loop_a_turn_after_each_slice(aiohttp_client):
    body = b'{"results":"' + b"x" * (64 * SEND_CHUNK) + b'"}'
    reads = StatusReads(None, ServerConfig())
    turns = 0
    during: list[int] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        start = turns
        resp = await reads.send(request, body)
        during.append(turns - start)
        return resp

    async def count_turns():
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    app = web.Application()
    app.router.add_get("/status", handler)
    client = await aiohttp_client(app)
    counter = asyncio.ensure_future(count_turns())
    try:
        resp = await client.get("/status")
        got = await resp.read()
    finally:
        counter.cancel()
    assert got == body
    assert during and during[0] >= 64, during  # a turn for others after every slice
