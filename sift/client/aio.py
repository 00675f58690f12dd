"""`AsyncClient`: every Sift route as an awaitable method, on one aiohttp session.

aiohttp is the HTTP library the rest of Sift already uses, so the client adds no dependency. The
session is made on first use inside the caller's event loop and reuses connections; proxies
from the environment are ignored (`trust_env=False`), as Sift is usually on loopback. An answer
is read up to `max_response` bytes, so a wrong SIFT_URL pointing at a large download cannot
fill the caller's memory.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, cast

import aiohttp
import orjson

from sift.client import calls
from sift.client.errors import ConnectError, ProtocolError, api_error
from sift.client.types import (
    TERMINAL,
    CancelReply,
    Event,
    FetchResult,
    JobList,
    JobStatus,
    JobSummary,
    Mode,
    Submitted,
    Target,
)
from sift.constants import WAIT_MAX

DEFAULT_TIMEOUT = 120.0  # seconds for one request beyond any ?wait= hold
MAX_RESPONSE = 64 * 1024 * 1024  # bytes: 32 targets × a 100 000-character result fit many times
WAIT_ROUND = 30.0  # seconds each long-poll of batch_wait holds at most
RECONNECTS = 5  # event stream: failed reconnects in a row before giving up
RECONNECT_WAIT = 0.5  # seconds before the first reconnect (then 2×, 3×, …)
STREAM_IDLE = 60.0  # seconds without a byte (the server's heartbeat is 15 s) = a lost stream
TERMINAL_EVENTS = frozenset(f"job.{s}" for s in TERMINAL)

Progress = Callable[[JobStatus], Awaitable[None] | None]


class AsyncClient:
    """A Sift API client for asyncio code; use `async with AsyncClient() as sift:`.

    `url` and `key` default to SIFT_URL (else http://127.0.0.1:8077) and SIFT_KEY. A failure
    answer raises an `APIError` subclass carrying `status`, `error`, `hint` and the envelope.
    """

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_response: int = MAX_RESPONSE,
    ):
        self.endpoint = calls.endpoint(url, key)
        self.timeout = timeout
        self.max_response = max_response
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- routes -------------------------------------------------------------------------------

    async def fetch(
        self,
        url: str,
        *,
        mode: Mode | None = None,
        question: str | None = None,
        pages: str | None = None,
        grep: str | None = None,
        jq: str | None = None,
        context: bool | None = None,
        recover: bool | None = None,
        **options: Any,
    ) -> FetchResult:
        """`POST /v1/fetch`: one URL, clean and bounded. Options left `None` use the server's
        defaults; `**options` passes fields this client does not name yet."""
        named = dict(mode=mode, question=question, pages=pages, grep=grep, jq=jq)
        named.update(context=context, recover=recover, **options)
        return cast(FetchResult, await self.send(calls.fetch(url, named)))

    async def batch_submit(
        self,
        targets: Iterable[Target | str],
        *,
        fresh: bool = False,
        webhook: str | dict[str, Any] | None = None,
    ) -> Submitted:
        """`POST /v1/batch`: targets as URL strings or target dicts; `fresh` skips reuse of an
        identical recent job; `webhook` (a URL, or `{"url", "events"}`) gets its events."""
        return cast(Submitted, await self.send(calls.batch_submit(targets, fresh, webhook)))

    async def events(
        self,
        job_id: str,
        *,
        results: bool = False,
        after: int = 0,
        reconnects: int = RECONNECTS,
        reconnect_wait: float = RECONNECT_WAIT,
    ) -> AsyncIterator[Event]:
        """The job's events (`GET /v1/batch/{id}/events`), in order, each once, until its
        terminal event. A dropped connection is resumed after the last event read
        (`Last-Event-ID`); `reconnects` failures in a row without a new event raise
        `ConnectError`. Each event is `{"type", "timestamp", "data"}`."""
        failures = 0
        while True:
            call = calls.batch_events(job_id, after, results)
            try:
                async for event in self._stream(call):
                    failures = 0
                    after = event["data"]["event_id"]
                    yield event
                    if event["type"] in TERMINAL_EVENTS:
                        return
                return  # the server ended the stream: the job has ended (or is gone)
            except ConnectError:
                failures += 1
                if failures > reconnects:
                    raise
                await asyncio.sleep(reconnect_wait * failures)

    async def batch_status(
        self, job_id: str, *, wait: float = 0, results: bool = True, cursor: str | None = None
    ) -> JobStatus:
        """`GET /v1/batch/{id}`; `wait` (0–60 s) holds until the job ends or the time passes.

        A reply carries results up to the server's page size: without `cursor`, the later
        pages are read too and their results put in place (`next_cursor` is then None); with
        `cursor`, that one page as the server sent it (docs/CLIENT.md §Batch)."""
        call = calls.batch_status(job_id, wait, results, cursor)
        st = cast(JobStatus, await self.send(call))
        if cursor is None:
            await self._rest_of_results(job_id, st)
        return st

    async def _rest_of_results(self, job_id: str, st: JobStatus) -> None:
        by_idx = {t["idx"]: t for t in st.get("targets", [])}
        while st.get("next_cursor"):
            page = cast(
                JobStatus,
                await self.send(calls.batch_status(job_id, 0, True, st["next_cursor"])),
            )
            for t in page.get("targets", []):
                if "result" in t and t["idx"] in by_idx:
                    by_idx[t["idx"]].update(t)
            st["next_cursor"] = page.get("next_cursor")

    async def batch_wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        results: bool = True,
        on_progress: Progress | None = None,
        round_seconds: float = WAIT_ROUND,
    ) -> JobStatus:
        """The job's status once it ends, or when `timeout` seconds pass (None: no limit).

        Long-polls in rounds of at most `round_seconds`, so no request waits on a lost
        connection for long; `on_progress` (sync or async) sees each round's status. Check
        `status` in the answer: a timeout returns the job as it is, it does not raise.
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        step = min(max(round_seconds, 0.0), WAIT_MAX)
        while True:
            left = step if deadline is None else min(step, max(0.0, deadline - time.monotonic()))
            st = await self.batch_status(job_id, wait=round(left, 3), results=results)
            ended = st.get("status") in TERMINAL
            if on_progress is not None:
                done = on_progress(st)
                if inspect.isawaitable(done):
                    await done
            if ended or (deadline is not None and time.monotonic() >= deadline):
                return st

    async def batch_list(self, *, limit: int | None = None, cursor: str | None = None) -> JobList:
        """`GET /v1/batch`: one page of the caller's jobs (live first, then newest first)."""
        return cast(JobList, await self.send(calls.batch_list(limit, cursor)))

    async def batch_jobs(self, *, limit: int | None = None) -> AsyncIterator[JobSummary]:
        """Every job the caller has, following `next_cursor` page by page."""
        cursor = None
        while True:
            page = await self.batch_list(limit=limit, cursor=cursor)
            for job in page["jobs"]:
                yield job
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def batch_cancel(self, job_id: str) -> CancelReply:
        """`DELETE /v1/batch/{id}`; a finished job raises `Conflict` (its status in `body`)."""
        return cast(CancelReply, await self.send(calls.batch_cancel(job_id)))

    async def batch_retry(
        self,
        job_id: str,
        *,
        only_retryable: bool = False,
        webhook: str | dict[str, Any] | None = None,
    ) -> Submitted:
        """`POST /v1/batch/{id}/retry`: a new job from an ended job's failed targets; it keeps
        the old job's webhook unless `webhook` names another."""
        call = calls.batch_retry(job_id, only_retryable, webhook)
        return cast(Submitted, await self.send(call))

    async def health(self) -> dict[str, Any]:
        """`GET /healthz` (no key needed, sent anyway)."""
        return await self.send(calls.health())

    # -- transport ----------------------------------------------------------------------------

    async def send(self, call: calls.Call) -> dict[str, Any]:
        """One request; the parsed answer for an `ok` status, else the typed error."""
        self._session_open()
        assert self._session is not None
        base = self.endpoint.base
        data = None if call.body is None else orjson.dumps(call.body)
        headers = {"Content-Type": "application/json"} if data is not None else None
        query = {k: str(v) for k, v in (call.query or {}).items()} or None
        timeout = aiohttp.ClientTimeout(total=self.timeout + call.held)
        try:
            async with self._session.request(
                call.method,
                base + call.path,
                data=data,
                params=query,
                headers=headers,
                timeout=timeout,
            ) as resp:
                raw = await self._read(resp)
                status, retry_after = resp.status, resp.headers.get("Retry-After")
        except TimeoutError:  # before OSError, of which it is a subclass
            raise ConnectError(
                f"{base} did not answer within {self.timeout + call.held:g} s"
            ) from None
        except (aiohttp.ClientError, OSError) as e:
            raise ConnectError(f"cannot reach {base}: {e or type(e).__name__}") from None
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            what = "answer" if status in call.ok else "error"
            raise ProtocolError(
                f"{base} answered HTTP {status} without a Sift {what} (is SIFT_URL right?)"
            )
        if status in call.ok:
            return body
        raise api_error(status, body, retry_after)

    async def _stream(self, call: calls.Call) -> AsyncIterator[Event]:
        """The events of one connection; a lost one raises `ConnectError`."""
        session = self._session_open()
        base = self.endpoint.base
        headers = {"Accept": "text/event-stream", "Last-Event-ID": call.last_event_id or "0"}
        timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_read=STREAM_IDLE)
        try:
            async with session.get(
                base + call.path, params=call.query, headers=headers, timeout=timeout
            ) as resp:
                if resp.status not in call.ok:
                    raw = await self._read(resp)
                    try:
                        body = orjson.loads(raw) if raw else None
                    except orjson.JSONDecodeError:
                        body = None
                    if not isinstance(body, dict):
                        raise ProtocolError(f"{base} answered HTTP {resp.status} without a body")
                    raise api_error(resp.status, body, resp.headers.get("Retry-After"))
                data: list[bytes] = []
                async for line in resp.content:
                    line = line.rstrip(b"\r\n")
                    if not line:
                        if data:
                            yield orjson.loads(b"\n".join(data))
                            data = []
                    elif line.startswith(b"data:"):
                        data.append(line[5:].removeprefix(b" "))
        except TimeoutError:
            raise ConnectError(f"{base}: the event stream went quiet") from None
        except (aiohttp.ClientError, OSError) as e:
            raise ConnectError(f"event stream from {base} lost: {e or type(e).__name__}") from None

    def _session_open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                trust_env=False,
                headers={
                    "Authorization": f"Bearer {self.endpoint.key}",
                    "Accept": "application/json",
                },
            )
        return self._session

    async def _read(self, resp: aiohttp.ClientResponse) -> bytes:
        chunks, size = [], 0
        async for chunk in resp.content.iter_chunked(256 * 1024):
            size += len(chunk)
            if size > self.max_response:
                raise ProtocolError(f"the answer is over {self.max_response} bytes; not read")
            chunks.append(chunk)
        return b"".join(chunks)
