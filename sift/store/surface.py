"""The store's operations, declared once: what every engine implements and callers rely on
(docs/ARCHITECTURE.md §The store's surface).

`tests/unit/test_store_surface.py` checks both engines' classes against these Protocols (each
operation's name, parameters, their kinds and defaults, and whether it is awaited), so an
engine can neither miss an operation nor take its arguments differently. The values the
operations take and return are in `sift.store.records`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from sift.store import webhook_rules
from sift.store.event_rules import EventRow
from sift.store.records import (
    BatchSeries,
    CachedResponse,
    Claim,
    Finished,
    Heartbeat,
    Job,
    JobSummary,
    ListPosition,
    NewTarget,
    ResultPage,
    RobotsEntry,
    SubmitOutcome,
    TargetRow,
    WaitFacts,
)
from sift.store.webhook_rules import Delivery

Status = tuple[Job, list[TargetRow]]
StatusLinks = tuple[Job, list[TargetRow], str | None, list[str]]  # + retry_of, retries


class BatchOps(Protocol):
    """Jobs and targets: each operation is one transaction (docs/WORKER.md §The store's
    transactions), keyed by job id only; a miss answers None, False or 0."""

    async def submit(
        self,
        *,
        job_id: str,
        caller: str,
        caller_class: str,
        idem_key: str,
        targets: Sequence[NewTarget],
        now: float,
        ttl: float,
        targets_per_job: int,
        jobs_per_caller: int,
        jobs_total: int,
        fresh: bool = False,
        retry_of: str | None = None,
        webhook: tuple | None = None,  # (url, event types, results)
    ) -> SubmitOutcome: ...

    async def job(self, job_id: str) -> Job | None: ...

    async def status(self, job_id: str, *, results: bool = True) -> Status | None: ...

    async def status_links(
        self, job_id: str, *, results: bool = True, page: ResultPage | None = None
    ) -> StatusLinks | None: ...

    async def list_jobs(
        self,
        caller: str,
        caller_class: str,
        *,
        now: float,
        ttl: float,
        limit: int,
        after: ListPosition | None = None,
    ) -> list[JobSummary]: ...

    async def touch(self, job: Job, now: float) -> bool: ...

    async def cancel(self, job_id: str, now: float) -> Job | None: ...

    async def terminal_among(self, job_ids: Sequence[str]) -> list[str]: ...

    async def restart(self, now: float) -> int: ...

    async def live_owners(self) -> list[tuple[str, str, str]]: ...

    async def live_jobs(self) -> list[str]: ...

    async def sweep(self, now: float, ttl: float) -> int: ...

    async def claim(self, job_id: str, now: float) -> Claim | None: ...

    async def requeue(
        self,
        job_id: str,
        idx: int,
        *,
        retry_at: float,
        busy_since: float | None,
        now: float,
        reason: str | None = None,
    ) -> bool: ...

    async def finish(
        self,
        job_id: str,
        idx: int,
        *,
        status: str,
        outcome: str,
        seconds: float,
        now: float,
        result: str | None = None,
        error: str | None = None,
        hint: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        max_bytes: int | None = None,
        then_claim: Sequence[str] = (),
    ) -> Finished: ...


class ContentCacheOps(Protocol):
    @property
    def enabled(self) -> bool: ...

    async def get(self, caller_class: str, url: str, now: float) -> CachedResponse | None: ...

    def put(self, caller_class: str, resp: CachedResponse, now: float) -> asyncio.Future[None]: ...


class DigestCacheOps(Protocol):
    async def get(self, caller_class: str, key: str, now: float) -> str | None: ...

    async def put(self, caller_class: str, key: str, value: str, now: float) -> None: ...


class WorkerOps(Protocol):
    """The heartbeat; `dead_after` is how old a heartbeat may be while its worker counts as
    alive (`[store] worker_dead_after`)."""

    dead_after: float

    async def beat(self, pid: int, started_at: float, now: float) -> None: ...

    async def clear(self, pid: int) -> None: ...

    async def get(self, now: float) -> Heartbeat | None: ...

    async def live(self, now: float) -> int: ...


class PolitenessOps(Protocol):
    """robots.txt verdicts and each host's not-before time (docs/WORKER.md §Spacing and waits)."""

    async def robots_get(self, origin: str, now: float) -> RobotsEntry | None: ...

    async def robots_put(self, entry: RobotsEntry) -> None: ...

    async def reserve(self, host: str, now: float, spacing: float) -> float | None: ...

    async def defer(self, host: str, until: float, now: float) -> None: ...

    async def waits(self, hosts: Iterable[str], now: float) -> dict[str, float]: ...


class EventOps(Protocol):
    """A job's event log (docs/API.md §Events); written inside the batch transactions, so only
    reads are operations here."""

    async def read(
        self, job_id: str, *, after: int = 0, results: bool = False
    ) -> tuple[Job, list[EventRow]] | None: ...

    async def last_ids(self, job_ids: Sequence[str]) -> dict[str, int]: ...


class WebhookOps(Protocol):
    """The webhook outbox (docs/API.md §Webhooks)."""

    async def take(
        self, now: float, *, limit: int = 16, lease: float = webhook_rules.LEASE
    ) -> list[Delivery]: ...

    async def record(
        self, job_id: str, event_id: int, *, status: int, outcome: str, retry_at: float | None
    ) -> bool: ...

    async def state(self, job_id: str) -> dict | None: ...

    async def spec(self, job_id: str) -> tuple[str, tuple[str, ...], bool] | None: ...

    async def redeliver(self, job_id: str, now: float) -> int | None: ...

    async def next_due(self) -> float | None: ...


class WaitOps(Protocol):
    """What a live job's pending targets wait for (docs/API.md §Waiting targets), one read."""

    async def facts(self, job_id: str, now: float) -> WaitFacts: ...


class StoreOps(Protocol):
    """What `open_store(cfg)` returns, whichever engine."""

    engine: str
    batch: BatchOps
    cache: ContentCacheOps
    digests: DigestCacheOps
    worker: WorkerOps
    politeness: PolitenessOps
    events: EventOps
    webhooks: WebhookOps
    waits: WaitOps

    async def batch_series(self) -> BatchSeries: ...

    async def data_version(self) -> int: ...

    async def checkpoint(self) -> None: ...

    @property
    def path(self) -> Path: ...

    async def on_work(self, wake: Callable[[], None]) -> bool: ...

    async def subscribe(self, topic: str, wake: Callable[[str], None]) -> bool: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...
