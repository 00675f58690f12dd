"""The job event log's rules, the same on both engines (docs/API.md §Events).

Each engine's `events` module appends rows inside the transaction that makes the change; this
module decides what a row says, so the two engines cannot drift: the kinds, the stored data of
each (the wire form, as a status read shows the same target), what a restricted caller's event
leaves out (what its log lines leave out, `sift.log.REDACTED_FOR_RESTRICTED`), and the bound
on a job's events.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson

from sift.errors import retry_after_field
from sift.log import REDACTED_FOR_RESTRICTED
from sift.status import LIVE, JobStatus, TargetStatus

JOB_RUNNING = "job.running"
TARGET_DONE = "target.done"
TARGET_FAILED = "target.failed"
JOB_ENDS = {str(s): f"job.{s}" for s in JobStatus if s not in (JobStatus.QUEUED, JobStatus.RUNNING)}
TERMINAL_KINDS = frozenset(JOB_ENDS.values())
TARGET_KINDS = frozenset({TARGET_DONE, TARGET_FAILED})
KINDS = (JOB_RUNNING, TARGET_DONE, TARGET_FAILED, *JOB_ENDS.values())

RESTRICTED = "restricted"  # the caller class whose events are redacted (sift.auth.RESTRICTED)
VERDICT = b'"verdict"'
_VERDICT = VERDICT.decode()


class EventRow(NamedTuple):
    """One stored event, as a reader gets it: `url` and `result` come from the target's row
    at read time (None for job events, for a restricted caller's url, and without results)."""

    job_id: str
    id: int
    kind: str
    idx: int | None
    at: float
    data: str  # JSON object of the event's own fields
    url: str | None = None
    result: str | None = None


def announces_targets(job_status: str) -> bool:
    """A target stored after its job ended (the one in flight at a cancel) is kept and shown
    by status reads, but not announced: the terminal event is always a job's last."""
    return job_status in LIVE


def max_events(targets_total: int) -> int:
    """A job's log holds at most one event per target, `job.running` and one terminal event."""
    return targets_total + 2


def _dump(fields: dict, restricted: bool) -> str:
    if restricted:
        fields = {k: v for k, v in fields.items() if k not in REDACTED_FOR_RESTRICTED}
    return orjson.dumps(fields).decode()


def running_data() -> str:
    return _dump({"status": str(JobStatus.RUNNING)}, False)


def _verdict(result: str | None):
    """The result's top-level `verdict`, when it has one (looked for before any parse: most
    results have none, and a result may be large)."""
    if not result or _VERDICT not in result:  # the str itself: no copy of a large result
        return None
    try:
        parsed = orjson.loads(result)
    except orjson.JSONDecodeError:
        return None
    return parsed.get("verdict") if isinstance(parsed, dict) else None


def target_kind(status: str) -> str | None:
    if status == TargetStatus.DONE:
        return TARGET_DONE
    if status == TargetStatus.FAILED:
        return TARGET_FAILED
    return None


def target_data(
    idx: int,
    status: str,
    outcome: str,
    *,
    result: str | None,
    error: str | None,
    hint: str | None,
    retryable: bool | None,
    retry_after: float | None,
    restricted: bool,
) -> str:
    """A stored target's event: the fields its status entry shows, plus the outcome (and the
    result's verdict, if any); the url and result are joined at read time."""
    fields: dict = {"idx": idx, "status": status, "outcome": outcome}
    if status == TargetStatus.FAILED:
        fields["error"] = error or ""
        fields["hint"] = hint
        fields["retryable"] = bool(retryable)
        fields["retry_after"] = retry_after_field(bool(retryable), retry_after)
    else:
        verdict = _verdict(result)
        if verdict is not None:
            fields["verdict"] = verdict
    return _dump(fields, restricted)


def end_data(
    status: str, error: str, total: int, done: int, failed: int, *, restricted: bool
) -> str:
    """A terminal event: the job's status and counts as its status read shows them."""
    return _dump(
        {
            "status": status,
            "error": error or "",
            "targets_total": total,
            "targets_done": done,
            "targets_failed": failed,
        },
        restricted,
    )
