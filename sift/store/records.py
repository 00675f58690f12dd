"""The values the store's operations take and return, whatever engine keeps them.

Rows are tuples where a read builds many of them per request (a status read builds dozens);
everything else is a frozen dataclass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple


class Job(NamedTuple):
    """A `batch_job` row."""

    id: str
    caller: str
    caller_class: str
    idem_key: str
    status: str
    error: str
    targets_total: int
    targets_done: int
    created_at: float
    lease: float
    nbytes: int
    started_at: float | None = None


class ResultPage(NamedTuple):
    """Which stored results a status read carries: those of targets from `first` on, while
    their bytes (counted from `first`) stay within `max_bytes`; the first one always
    (docs/API.md §GET /v1/batch/{job_id})."""

    first: int
    max_bytes: int


class TargetRow(NamedTuple):
    job_id: str
    idx: int
    url: str
    options: str
    status: str
    result: str | None
    error: str | None
    hint: str | None
    retry_at: float | None = None
    busy_since: float | None = None
    retryable: int | None = None  # a failed target: may a retry succeed (0/1)
    retry_after: float | None = None  # a failed target: the earliest time a retry makes sense


@dataclass(frozen=True, slots=True)
class NewTarget:
    url: str
    options: str  # JSON of the target's options


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job a submit would create: who asks, for which list, and what it retries."""

    id: str
    caller: str
    caller_class: str
    idem_key: str
    targets: Sequence[NewTarget]
    retry_of: str | None = None


@dataclass(frozen=True, slots=True)
class Caps:
    """The submit caps (docs/API.md §POST /v1/batch)."""

    targets_per_job: int
    jobs_per_caller: int
    jobs_total: int


@dataclass(frozen=True, slots=True)
class Fetched:
    """A target's outcome as the drain stores it."""

    status: str
    outcome: str
    seconds: float
    result: str | None = None
    error: str | None = None
    hint: str | None = None
    retryable: bool = False
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """A target the worker has taken: it is `running` until finished or requeued."""

    job_id: str
    idx: int
    url: str
    options: str
    caller: str
    caller_class: str
    busy_since: float | None


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    kind: str  # created | reused | too_many | caller_busy | jobs_busy
    job: Job | None = None
    live_job: str | None = None  # caller_busy: the caller's oldest live job


class JobSummary(NamedTuple):
    """One entry of a caller's job list (docs/API.md §GET /v1/batch)."""

    id: str
    status: str
    targets_total: int
    targets_done: int
    targets_failed: int
    created_at: float
    lease: float
    retry_of: str | None
    ended: int  # 0 live, 1 ended: the list's first sort key


class ListPosition(NamedTuple):
    """Where a page of the job list ended: the next page starts after this entry."""

    ended: int
    created_at: float
    id: str


@dataclass(frozen=True, slots=True)
class Finished:
    stored: bool  # False when the target was not running (or the job is gone)
    terminal: str | None = None  # the job's terminal status, set by this call
    evicted: int = 0  # finished jobs removed by the byte budget in the same transaction
    next: Claim | None = None  # the target taken in the same transaction (`then_claim`)


@dataclass(frozen=True, slots=True)
class BatchSeries:
    """What `/metrics` shows of the batch: the counter rows and the two gauges, one snapshot."""

    counters: dict[tuple[str, str], float]
    queue_depth: int
    inflight: int


@dataclass(frozen=True, slots=True)
class CachedResponse:
    url: str
    final_url: str
    status: int
    content_type: str
    body: bytes
    fetched_at: float


@dataclass(frozen=True, slots=True)
class Heartbeat:
    pid: int
    started_at: float
    heartbeat: float


@dataclass(frozen=True, slots=True)
class RobotsEntry:
    """One origin's robots.txt as last fetched (docs/WORKER.md §robots.txt)."""

    origin: str  # scheme://host[:port]
    fetched_at: float
    expires_at: float
    status: int  # the upstream status; 0 when the site could not be reached
    body: str  # the robots.txt text (empty unless status is 2xx)


@dataclass(frozen=True, slots=True)
class WaitFacts:
    """What a live job's pending targets wait for, as the store records it (docs/API.md
    §Waiting targets)."""

    pending: dict[int, tuple[float | None, str | None]]  # idx -> (retry_at, stored reason)
    running_urls: list[str] = field(default_factory=list)  # batch targets in flight, all jobs
    live_jobs: int = 0
    host_waits: dict[str, tuple[float, str | None]] = field(default_factory=dict)  # future only
