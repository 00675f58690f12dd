"""The wire shapes as typed dicts (docs/API.md).

Typed dicts, not classes: an answer is the server's JSON unchanged, so a field a newer server adds
reaches the caller without a client release, and `json.dumps(answer)` prints exactly what came
over the wire. `total=False` where a field appears only in some answers.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from sift.status import TERMINAL as TERMINAL  # job statuses after which nothing changes

JobStatusName = Literal["queued", "running", "done", "partial", "failed", "cancelled"]
TargetStatusName = Literal["pending", "running", "done", "failed"]
Mode = Literal["clean", "markdown", "text", "raw", "links"]  # sift.fetch.target.MODES, typed


class Target(TypedDict, total=False):
    """One target: the `/v1/fetch` request fields."""

    url: str
    mode: Mode
    question: str
    pages: str
    grep: str
    jq: str
    context: bool
    recover: bool
    links: bool
    images: bool
    max_age: int


class Pages(TypedDict):
    total: int
    returned: str


class FetchResult(TypedDict, total=False):
    """The success envelope of `/v1/fetch`, also a done target's `result`."""

    success: bool
    url: str
    final_url: str
    status: int
    content_type: str
    title: str
    mode: str
    content: str
    truncated: bool
    chars: int
    bytes: int
    cached: bool
    source: Literal["live", "archive"]
    fetched_at: str
    archived_at: str
    hint: str
    pages: Pages
    matches: int
    answer_by: str
    context: list[str]
    metadata: dict[str, str | None]
    verdict: Literal["ok", "thin", "empty", "soft_404", "bot_wall", "login_wall"]


class Submitted(TypedDict, total=False):
    """The `202` of a submit or a retry."""

    success: bool
    job_id: str
    status: JobStatusName
    targets: int
    reused: bool
    worker: Literal["up", "down"]
    warning: str
    retry_of: str


class TargetState(TypedDict, total=False):
    """One entry of a job's `targets`: done with `result`, failed with `error` and `hint`."""

    idx: int
    url: str
    status: TargetStatusName
    result: FetchResult
    error: str
    hint: str | None
    retryable: bool
    retry_after: str | None
    waiting: Waiting


class Waiting(TypedDict):
    """Why a pending target of a live job waits (docs/API.md §Waiting targets)."""

    reason: Literal["host_busy", "crawl_delay", "retry_after", "robots", "turn", "worker_down"]
    host: str
    not_before: str | None


class Eta(TypedDict):
    """Seconds until a live job ends, as a range (docs/API.md §Waiting targets)."""

    min: int
    max: int


class JobSummary(TypedDict, total=False):
    """One entry of `GET /v1/batch`."""

    job_id: str
    status: JobStatusName
    targets_total: int
    targets_done: int
    targets_failed: int
    created_at: str
    expires_at: str
    retry_of: str | None


class JobStatus(JobSummary, total=False):
    """`GET /v1/batch/{id}`: the summary's fields and the targets."""

    error: str
    retries: list[str]
    worker: Literal["up", "down"]
    warning: str
    eta: Eta | None
    targets: list[TargetState]
    next_cursor: str | None  # results left for the next page (docs/API.md §GET /v1/batch/{id})


class Event(TypedDict):
    """One job event (docs/API.md §Events): what the event stream and webhooks carry."""

    type: str  # job.running, target.done, target.failed, job.done|partial|failed|cancelled
    timestamp: str
    data: dict  # job_id, event_id, and the event's own fields


class JobList(TypedDict):
    """`GET /v1/batch`: a page of the caller's jobs, live first, then newest first."""

    success: bool
    jobs: list[JobSummary]
    next_cursor: str | None


class CancelReply(TypedDict):
    success: bool
    status: JobStatusName
