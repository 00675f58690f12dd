"""The `GET /v1/batch/{id}` body (docs/API.md §GET /v1/batch/{job_id}), built from the stored rows.

Stored results are already the JSON of the success envelope; they are embedded as
`orjson.Fragment`s so a large result is never parsed and re-serialized. The body must therefore
be serialized with orjson (`status_json` does it).
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from sift.errors import BadRequest, retry_after_field
from sift.status import LIVE, TargetStatus
from sift.store import EventRow, Job, ResultPage, TargetRow
from sift.timefmt import rfc3339


def target_entry(row: TargetRow, *, results: bool = True, waiting: dict | None = None) -> dict:
    entry: dict = {"idx": row.idx, "url": row.url, "status": row.status}
    if waiting is not None:
        entry["waiting"] = waiting  # a live job's pending target (docs/API.md §Waiting targets)
    if row.status == TargetStatus.DONE:
        if results and row.result is not None:
            entry["result"] = orjson.Fragment(row.result)
    elif row.status == TargetStatus.FAILED:
        entry["error"] = row.error or ""
        entry["hint"] = row.hint
        entry["retryable"] = bool(row.retryable)
        entry["retry_after"] = retry_after_field(bool(row.retryable), row.retry_after)
    return entry


NO_WORKER = "no worker is running; the job is queued and starts when one does"


def worker_fields(worker_up: bool | None) -> dict:
    """`worker` (and, when it is down, `warning`) of a submit reply or a status body."""
    if worker_up is None:
        return {}
    return {"worker": "up"} if worker_up else {"worker": "down", "warning": NO_WORKER}


BAD_CURSOR = "cursor is not one this job gave out; read again without it"


def parse_cursor(raw: str | None) -> int:
    """The first target whose result a status read carries (`cursor`, the `next_cursor` of
    the reply before)."""
    if raw is None:
        return 0
    if not raw.isascii() or not raw.isdigit() or len(raw) > 6:
        raise BadRequest(BAD_CURSOR)
    return int(raw)


def next_cursor(targets: Sequence[TargetRow], page: ResultPage | None) -> str | None:
    """Where the next page of results starts: the first done target after the page's first
    whose result the page left out (the page's first target is always in it)."""
    if page is None:
        return None
    for t in targets:
        if t.idx > page.first and t.status == TargetStatus.DONE and t.result is None:
            return str(t.idx)
    return None


def status_body(
    job: Job,
    targets: Sequence[TargetRow],
    *,
    results: bool = True,
    page: ResultPage | None = None,
    retry_of: str | None = None,
    retries: Sequence[str] = (),
    expires_at: float | None = None,
    worker_up: bool | None = None,
    waits: tuple[dict[int, dict], dict | None] | None = None,
) -> dict:
    """The status body; `results=False` leaves out the `result` objects, and `page` says which
    results `targets` carries (docs/API.md §GET /v1/batch/{job_id}). `targets_done` counts
    finished targets (done or failed), `targets_failed` the failed ones among them."""
    body = {
        "job_id": job.id,
        "status": job.status,
        "error": job.error or "",
        "targets_total": job.targets_total,
        "targets_done": job.targets_done,
        "targets_failed": sum(t.status == TargetStatus.FAILED for t in targets),
        "created_at": rfc3339(job.created_at),
    }
    if expires_at is not None:
        body["expires_at"] = rfc3339(expires_at)
    body["retry_of"] = retry_of
    body["retries"] = list(retries)
    body.update(worker_fields(worker_up))
    waiting: dict[int, dict] = {}
    if waits is not None and job.status in LIVE:  # docs/API.md §Waiting targets
        waiting, body["eta"] = waits
    body["targets"] = [
        target_entry(t, results=results, waiting=waiting.get(t.idx)) for t in targets
    ]
    body["next_cursor"] = next_cursor(targets, page) if results else None
    return body


def status_json(job: Job, targets: Sequence[TargetRow], **options) -> bytes:
    return orjson.dumps(status_body(job, targets, **options))


def event_body(row: EventRow) -> dict:
    """One event as the stream and webhooks send it (docs/API.md §Events): the Standard
    Webhooks payload shape, `{"type", "timestamp", "data"}`."""
    data: dict = {"job_id": row.job_id, "event_id": row.id}
    fields = orjson.loads(row.data)
    if row.idx is not None:
        data["idx"] = fields.pop("idx", row.idx)
        if row.url is not None:
            data["url"] = row.url
    data.update(fields)
    if row.result is not None:
        data["result"] = orjson.Fragment(row.result)
    return {"type": row.kind, "timestamp": rfc3339(row.at), "data": data}


def sse_frame(row: EventRow) -> bytes:
    """One Server-Sent Events frame; its `id` is the event id a client resumes after."""
    payload = orjson.dumps(event_body(row)).replace(b"\r", b"")
    lines = b"".join(b"data: " + line + b"\n" for line in payload.split(b"\n"))
    return b"id: %d\nevent: %s\n%s\n" % (row.id, row.kind.encode(), lines)
