"""Status reads with bounded memory: `GET /v1/batch/{id}` may carry megabytes of results.

A job of 32 targets with 100,000-character results is a body of several megabytes, and a
client that never reads its reply keeps that body in the API's memory for as long as the
connection lives. So (docs/SECURITY.md §Limits and isolation):

* **One body per snapshot.** Reads of the same job that arrive together (the long-polls a
  finished job wakes at once) share one build; a finished job's body is kept, up to
  `[server] status_cache` bytes in all, until the job changes.
* **Bounded per reply.** A reply carries results up to `[server] status_page` bytes (the first
  one always); the rest are paged with `next_cursor`, so a job's size never makes one reply.
* **No copy per read.** A reply is written as slices of the shared body and the read's own
  fields, a chunk at a time, so an unread reply holds about one chunk of its own.
* **Bounded in flight, per caller first.** A read with results holds its bytes (its page's
  size) from the build until the reply is written. A caller's first such read is always
  admitted: another caller's unread replies cannot hold it back. Past it, one caller has at
  most `[server] status_reads` such reads, and the reads past each caller's first together at
  most `[server] status_bytes`; past either, 429 with `retry` (or ask with `results=false`). A
  reply not taken by the client within `[server] send_timeout` closes the connection and frees
  its share.
* **Memory goes back.** Once the last large reply is written, the allocator is asked to return
  free memory to the system (`sift.memory.trim`), so the API's RSS returns to its baseline.
* **Ownership first.** The job row alone (one primary-key read) decides between the owner's
  answer and 404, so a job of another caller and an unknown id take the same path and time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import orjson
from aiohttp import web

from sift import memory
from sift.auth import Caller
from sift.batch.jobs import JOB_NOT_FOUND, owns
from sift.batch.wire import status_json
from sift.config import ServerConfig
from sift.errors import NotFound, TooManyRequests
from sift.status import TERMINAL
from sift.store import Job, ResultPage, Store, TargetRow

TRIM_AFTER = 1024 * 1024  # bytes of replies written since the last trim
SEND_CHUNK = 64 * 1024  # bytes of a reply handed to the transport at a time
# (job, its targets) -> (each pending target's `waiting`, the job's `eta`)
Explain = Callable[[Job, Sequence[TargetRow]], Awaitable[tuple[dict[int, dict], dict | None]]]


class StatusReads:
    """Per API process: shared builds, admission by caller and bytes, a cache of finished
    jobs' bodies."""

    def __init__(self, store: Store, cfg: ServerConfig, explain: Explain | None = None):
        self.store = store
        self.cfg = cfg
        self.explain = explain  # a live job's waits and eta, read with its body
        self._flights: dict[tuple, asyncio.Future[bytes]] = {}
        self._done: OrderedDict[tuple, bytes] = OrderedDict()
        self._done_bytes = 0
        self._per_caller: dict[tuple, int] = {}
        self.bytes_in_flight = 0
        self._written_since_trim = 0

    async def job(self, job_id: str, caller: Caller) -> Job:
        """The caller's job row, or NotFound exactly as for an unknown id."""
        job = await self.store.batch.job(job_id)
        if job is None or not owns(job, caller):
            raise NotFound(JOB_NOT_FOUND)
        return job

    @contextlib.asynccontextmanager
    async def admitted(self, caller: Caller, job: Job, results: bool) -> AsyncIterator[None]:
        """Hold a share of the in-flight budget while a reply with results is built and sent."""
        if not results:
            yield
            return
        who = caller.identity
        size = max(min(job.nbytes, self.cfg.status_page), 1)
        held = self._per_caller.get(who, 0)
        if held >= self.cfg.status_reads:
            raise TooManyRequests(
                f"more than {self.cfg.status_reads} status reads with results in flight for "
                "this caller; retry, or read with results=false"
            )
        shared = held > 0  # a caller's first read costs at most one page, whatever others do
        if shared and self.bytes_in_flight + size > self.cfg.status_bytes:
            raise TooManyRequests(
                "too many large status replies in flight; retry, or read with results=false"
            )
        self._per_caller[who] = held + 1
        if shared:
            self.bytes_in_flight += size
        try:
            yield
        finally:
            if shared:
                self.bytes_in_flight -= size
            left = self._per_caller[who] - 1
            if left:
                self._per_caller[who] = left
            else:
                del self._per_caller[who]
            self._written_since_trim += size
            if self.bytes_in_flight == 0 and self._written_since_trim >= TRIM_AFTER:
                self._written_since_trim = 0
                memory.trim()

    async def body(self, job: Job, results: bool, first: int = 0) -> bytes:
        """The status body of `job` (as read at least as late as `job`), its results from
        target `first` on, built once for all the reads that ask for the same snapshot at the
        same time."""
        key = (job.id, results, first, job.status, job.targets_done, job.nbytes, job.error)
        cached = self._done.get(key)
        if cached is not None:
            self._done.move_to_end(key)
            return cached
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._build(job.id, results, first))
            self._flights[key] = flight
            flight.add_done_callback(lambda f: self._landed(key, f, job.status in TERMINAL))
        return await asyncio.shield(flight)

    async def _build(self, job_id: str, results: bool, first: int) -> bytes:
        page = ResultPage(first, self.cfg.status_page) if results else None
        got = await self.store.batch.status_links(job_id, results=results, page=page)
        if got is None:
            raise NotFound(JOB_NOT_FOUND)
        job, targets, retry_of, retries = got
        waits = None
        if job.status not in TERMINAL and self.explain is not None:
            waits = await self.explain(job, targets)
        return status_json(
            job,
            targets,
            results=results,
            page=page,
            retry_of=retry_of,
            retries=retries,
            waits=waits,
        )

    def forget(self, job_id: str) -> None:
        """Drop the kept bodies of a finished job whose links changed (a retry of it)."""
        for key in [k for k in self._done if k[0] == job_id]:
            self._done_bytes -= len(self._done.pop(key))

    def _landed(self, key: tuple, flight: asyncio.Future, terminal: bool) -> None:
        self._flights.pop(key, None)
        if not terminal or flight.cancelled() or flight.exception() is not None:
            return
        body = flight.result()
        if len(body) > self.cfg.status_cache:
            return
        self._done[key] = body
        self._done_bytes += len(body)
        while self._done_bytes > self.cfg.status_cache:
            _, old = self._done.popitem(last=False)
            self._done_bytes -= len(old)

    async def send(
        self, request: web.Request, body: bytes, fields: dict | None = None
    ) -> web.StreamResponse:
        """Write the reply here, within `[server] send_timeout`, so the admission covers it.

        `body` is the shared build and `fields` this read's own: they are written as slices of
        `body` and a tail, never joined into a copy, `SEND_CHUNK` bytes at a time with a wait
        for the socket between, so a reply the client does not read holds about one chunk in
        the transport beside the one shared body, not a copy of its own. Each slice gives the
        event loop a turn: to a client that reads as fast as it is sent the socket never
        pushes back, and a 4 MiB page written in one go held the loop about 30 ms under the
        hostile bench, while every other caller's request waited."""
        head = memoryview(body)[:-1]  # the JSON object without its closing brace
        tail = b"," + orjson.dumps(fields)[1:] if fields else b"}"
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.content_length = len(head) + len(tail)
        try:
            async with asyncio.timeout(self.cfg.send_timeout):
                await resp.prepare(request)
                for at in range(0, len(head), SEND_CHUNK):
                    await resp.write(head[at : at + SEND_CHUNK])
                    await asyncio.sleep(0)
                await resp.write(tail)
                await resp.write_eof()
        except TimeoutError:
            if request.transport is not None:
                request.transport.abort()  # drops what the client never took
        except ConnectionError:
            pass  # the client went away; nothing to answer
        return resp
