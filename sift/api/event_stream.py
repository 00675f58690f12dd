"""`GET /v1/batch/{job_id}/events`: a job's event log as Server-Sent Events (docs/API.md
§GET /v1/batch/{job_id}/events).

A small writer of our own, not a library: a frame is three lines (`sift.batch.wire.sse_frame`),
and what matters here is what a library would hide: each write bounded by `[server]
send_timeout` and the status reads' admission, the long-poll watcher's wake-ups instead of a
task per stream, the key re-checked on every turn (a revoked key's stream ends), and the end
right after the terminal event.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from sift import batch
from sift.api.appkeys import CALLER, CLOCK, CONFIG, EVENT_READS, KEYS, READS, STORE, WAITER
from sift.batch.wire import sse_frame
from sift.errors import BadRequest, TooManyRequests
from sift.status import TERMINAL
from sift.store import STORE_ERRORS
from sift.store.event_rules import TERMINAL_KINDS

routes = web.RouteTableDef()


HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # a proxy in front must not hold frames back
}
HEARTBEAT = b": heartbeat\n\n"


def _options(request: web.Request) -> tuple[int, bool]:
    """(the id to resume after, results): `Last-Event-ID` wins over `?after=`."""
    unknown = sorted(set(request.query) - {"after", "results"})
    if unknown:
        raise BadRequest(f"unknown query parameter {unknown[0]!r} (known: after, results)")
    raw = request.headers.get("Last-Event-ID") or request.query.get("after", "0")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise BadRequest("Last-Event-ID (or after) must be an event id: a whole number from 0")
    raw_results = request.query.get("results", "false").lower()
    if raw_results not in ("true", "false", "1", "0"):
        raise BadRequest("results must be true or false")
    return int(raw), raw_results in ("true", "1")


def _key(request: web.Request) -> str:
    return request.headers.get("Authorization", "").partition(" ")[2].strip()


@routes.get("/v1/batch/{job_id}/events")
async def events(request: web.Request) -> web.StreamResponse:
    after, results = _options(request)
    app, job_id, caller = request.app, request.match_info["job_id"], request[CALLER]
    reads, store, cfg = app[READS], app[STORE], app[CONFIG].server
    job = await reads.job(job_id, caller)  # 404 exactly as a status read
    async with reads.admitted(caller, job, results):
        pass  # a stream that could not be read as a status read now is refused the same way
    await batch.touch(store, job, app[CLOCK]())
    resp = web.StreamResponse(headers=HEADERS)
    try:
        async with asyncio.timeout(cfg.send_timeout):
            await resp.prepare(request)
        async with app[WAITER].follow(job_id, after) as follow:
            await _stream(request, resp, follow, results)
        with contextlib.suppress(ConnectionError, TimeoutError):
            await _write_eof(resp, cfg.send_timeout)
    except TimeoutError:
        if request.transport is not None:
            request.transport.abort()  # a client that does not take its frames
    except (*STORE_ERRORS, TooManyRequests):
        if not resp.prepared:
            raise
        if request.transport is not None:
            request.transport.abort()  # the client resumes with Last-Event-ID, later
    except ConnectionError:
        pass  # the client went away; it resumes with Last-Event-ID
    return resp


async def _stream(request: web.Request, resp: web.StreamResponse, follow, results: bool) -> None:
    """Write the log from `follow.after` on until its terminal event, the job's end or the
    key's revocation; the follow's flag is cleared before each read, so an event stored during
    the read wakes the next wait (docs/ARCHITECTURE.md §Wake-ups)."""
    app, job_id, caller = request.app, follow.job_id, request[CALLER]
    reads, cfg, key, keys = app[READS], app[CONFIG].server, _key(request), app[KEYS]
    loop = asyncio.get_running_loop()
    wrote = loop.time()
    while keys.lookup(key) == caller:
        follow.changed.clear()
        got = await app[EVENT_READS].read(job_id, follow.after, results)
        if got is None:
            return  # the job is gone
        job, rows = got
        if rows:
            async with reads.admitted(caller, job, results and job.nbytes > 0):
                await _write(resp, b"".join(map(sse_frame, rows)), cfg.send_timeout)
            wrote, follow.after = loop.time(), rows[-1].id
            if rows[-1].kind in TERMINAL_KINDS:
                return
            continue
        if job.status in TERMINAL:
            return  # its terminal event was sent before (or it ended before the log)
        quiet = loop.time() - wrote
        if quiet >= cfg.event_heartbeat:
            await _write(resp, HEARTBEAT, cfg.send_timeout)
            wrote, quiet = loop.time(), 0.0
        await follow.wait(cfg.event_heartbeat - quiet)


async def _write(resp: web.StreamResponse, data: bytes, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        await resp.write(data)


async def _write_eof(resp: web.StreamResponse, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        await resp.write_eof()
