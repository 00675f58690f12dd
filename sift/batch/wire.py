"""The `GET /v1/batch/{id}` body (docs/API.md §GET /v1/batch/{job_id}), built from the stored rows.

Stored results are already the JSON of the success envelope; they are embedded as
`orjson.Fragment`s so a large result is never parsed and re-serialized. The body must therefore
be serialized with orjson (`status_json` does it).
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from sift.errors import retry_after_field
from sift.status import LIVE, TargetStatus
from sift.store import Job, TargetRow
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


def status_body(
    job: Job,
    targets: Sequence[TargetRow],
    *,
    results: bool = True,
    retry_of: str | None = None,
    retries: Sequence[str] = (),
    expires_at: float | None = None,
    worker_up: bool | None = None,
    waits: tuple[dict[int, dict], dict | None] | None = None,
) -> dict:
    """The status body; `results=False` leaves out the `result` objects. `targets_done`
    counts finished targets (done or failed), `targets_failed` the failed ones among them."""
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
    return body


def status_json(job: Job, targets: Sequence[TargetRow], **options) -> bytes:
    return orjson.dumps(status_body(job, targets, **options))


def with_fields(body: bytes, fields: dict) -> bytes:
    """A JSON object's bytes with `fields` added, without parsing it again: a shared status
    body (built once for every reader) gets each read's own fields."""
    if not fields:
        return body
    return body[:-1] + b"," + orjson.dumps(fields)[1:]
