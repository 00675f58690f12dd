"""`Client`: the same methods as `AsyncClient`, for code without an event loop.

Each call runs the async client's coroutine on a private event loop in a daemon thread, so there
is one HTTP implementation, connections are reused across calls, and the client also works when
the calling thread already runs an event loop (a notebook, a framework's sync handler). An
`on_progress` callback of `batch_wait` runs on that private thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from sift.client.aio import (
    DEFAULT_TIMEOUT,
    MAX_RESPONSE,
    RECONNECT_WAIT,
    RECONNECTS,
    WAIT_ROUND,
    AsyncClient,
    Progress,
)
from sift.client.types import (
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

T = TypeVar("T")


class Client:
    """`AsyncClient`'s synchronous twin: the same arguments, methods, answers and errors. Use
    `with Client() as sift:` or call `close()`."""

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_response: int = MAX_RESPONSE,
    ):
        self._aio = AsyncClient(url, key, timeout=timeout, max_response=max_response)
        self.endpoint = self._aio.endpoint
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._aio.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="sift-client", daemon=True
                )
                self._thread.start()
            loop = self._loop
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # an interrupted caller leaves nothing running
            raise

    # -- routes (see AsyncClient for each one's rules) -----------------------------------------

    def fetch(
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
        named = dict(mode=mode, question=question, pages=pages, grep=grep, jq=jq)
        return self._run(self._aio.fetch(url, **named, context=context, recover=recover, **options))

    def batch_submit(
        self,
        targets: Iterable[Target | str],
        *,
        fresh: bool = False,
        webhook: str | dict[str, Any] | None = None,
    ) -> Submitted:
        return self._run(self._aio.batch_submit(list(targets), fresh=fresh, webhook=webhook))

    def events(
        self,
        job_id: str,
        *,
        results: bool = False,
        after: int = 0,
        reconnects: int = RECONNECTS,
        reconnect_wait: float = RECONNECT_WAIT,
    ) -> Iterator[Event]:
        """`AsyncClient.events` as a plain iterator: each event as it arrives."""
        stream = self._aio.events(
            job_id,
            results=results,
            after=after,
            reconnects=reconnects,
            reconnect_wait=reconnect_wait,
        )
        try:
            while True:
                try:
                    yield self._run(anext(stream))
                except StopAsyncIteration:
                    return
        finally:
            if self._loop is not None:
                self._run(stream.aclose())

    def batch_status(
        self, job_id: str, *, wait: float = 0, results: bool = True, cursor: str | None = None
    ) -> JobStatus:
        return self._run(self._aio.batch_status(job_id, wait=wait, results=results, cursor=cursor))

    def batch_wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        results: bool = True,
        on_progress: Progress | None = None,
        round_seconds: float = WAIT_ROUND,
    ) -> JobStatus:
        return self._run(
            self._aio.batch_wait(
                job_id,
                timeout=timeout,
                results=results,
                on_progress=on_progress,
                round_seconds=round_seconds,
            )
        )

    def batch_list(self, *, limit: int | None = None, cursor: str | None = None) -> JobList:
        return self._run(self._aio.batch_list(limit=limit, cursor=cursor))

    def batch_jobs(self, *, limit: int | None = None) -> Iterator[JobSummary]:
        cursor = None
        while True:
            page = self.batch_list(limit=limit, cursor=cursor)
            yield from page["jobs"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def batch_cancel(self, job_id: str) -> CancelReply:
        return self._run(self._aio.batch_cancel(job_id))

    def batch_retry(
        self,
        job_id: str,
        *,
        only_retryable: bool = False,
        webhook: str | dict[str, Any] | None = None,
    ) -> Submitted:
        return self._run(
            self._aio.batch_retry(job_id, only_retryable=only_retryable, webhook=webhook)
        )

    def health(self) -> dict[str, Any]:
        return self._run(self._aio.health())
