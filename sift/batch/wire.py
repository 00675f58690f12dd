"""The `GET /v1/batch/{id}` body (docs/API.md §GET /v1/batch/{job_id}), built from the stored rows.

Stored results are already the JSON of the success envelope; they are embedded as
`orjson.Fragment`s so a large result is never parsed and re-serialized. The body must therefore
be serialized with orjson (`status_json` does it).
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from sift.errors import retry_after_field
from sift.status import TargetStatus
from sift.store import Job, TargetRow
from sift.timefmt import rfc3339


def target_entry(row: TargetRow, *, results: bool = True) -> dict:
    entry: dict = {"idx": row.idx, "url": row.url, "status": row.status}
    if row.status == TargetStatus.DONE:
        if results and row.result is not None:
            entry["result"] = orjson.Fragment(row.result)
    elif row.status == TargetStatus.FAILED:
        entry["error"] = row.error or ""
        entry["hint"] = row.hint
        entry["retryable"] = bool(row.retryable)
        entry["retry_after"] = retry_after_field(bool(row.retryable), row.retry_after)
    return entry


def status_body(job: Job, targets: Sequence[TargetRow], *, results: bool = True) -> dict:
    """The status body; `results=False` leaves out the `result` objects."""
    return {
        "job_id": job.id,
        "status": job.status,
        "error": job.error or "",
        "targets_total": job.targets_total,
        "targets_done": job.targets_done,
        "created_at": rfc3339(job.created_at),
        "targets": [target_entry(t, results=results) for t in targets],
    }


def status_json(job: Job, targets: Sequence[TargetRow], *, results: bool = True) -> bytes:
    return orjson.dumps(status_body(job, targets, results=results))
