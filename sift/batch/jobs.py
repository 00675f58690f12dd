"""Status, cancel and touch for a job's owner (docs/WORKER.md §Submit, status,
cancel (API side)), for the API.

The store is keyed by job id only; ownership lives here. A job owned by someone else looks
exactly like an unknown one, so a caller cannot probe for other callers' jobs. Reads write
nothing; the API calls `touch` after an owner's read to keep the job's lease sliding.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from sift.auth import Caller
from sift.batch.wire import status_json
from sift.errors import Conflict, NotFound
from sift.status import TERMINAL, JobStatus
from sift.store import Job, Store, StoreBusy, TargetRow

JOB_NOT_FOUND = "job not found"
JOB_ID = re.compile(r"[0-9a-f]{32}")  # the shape of every id `submit` gives out


def owns(job: Job, caller: Caller) -> bool:
    """The whole identity must match: name, workspace and class."""
    return job.caller == caller.owner and job.caller_class == caller.cls


@dataclass(frozen=True, slots=True)
class JobStatusView:
    """One consistent snapshot of a job and its targets."""

    job: Job
    targets: list[TargetRow] = field(repr=False)
    results: bool = True
    retry_of: str | None = None
    retries: tuple[str, ...] = ()

    @property
    def terminal(self) -> bool:
        return self.job.status in TERMINAL

    def _options(self, expires_at: float | None, worker_up: bool | None) -> dict:
        return {
            "results": self.results,
            "retry_of": self.retry_of,
            "retries": self.retries,
            "expires_at": expires_at,
            "worker_up": worker_up,
        }

    def json(self, *, expires_at: float | None = None, worker_up: bool | None = None) -> bytes:
        return status_json(self.job, self.targets, **self._options(expires_at, worker_up))


async def read_status(
    store: Store, job_id: str, caller: Caller, *, results: bool = True
) -> JobStatusView | None:
    """The job as its owner sees it, or None (unknown or not theirs). Writes nothing."""
    got = await store.batch.status_links(job_id, results=results)
    if got is None or not owns(got[0], caller):
        return None
    job, targets, retry_of, retries = got
    return JobStatusView(job, targets, results, retry_of, tuple(retries))


async def touch(store: Store, job: Job, now: float) -> bool:
    """Slide the job's lease to `now` after its owner's read; best-effort: a read that worked
    is answered even while another process holds the write lock (the next read touches)."""
    try:
        return await store.batch.touch(job, now)
    except StoreBusy:
        return False


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    cancelled: bool  # this call flipped a live job to cancelled
    prior: str | None  # the job's status before the call; None: unknown (or not the caller's)

    def body(self) -> dict:
        """The `200` body, or the typed error the API renders (404 unknown, 409 finished)."""
        if self.prior is None:
            raise NotFound(JOB_NOT_FOUND)
        if self.cancelled or self.prior == JobStatus.CANCELLED:
            return {"success": True, "status": str(JobStatus.CANCELLED)}
        raise Conflict(f"job already finished: {self.prior}", status=self.prior)


async def cancel(
    store: Store,
    job_id: str,
    caller: Caller,
    *,
    now: float,
    nudge: Callable[[], object] | None = None,
) -> CancelOutcome:
    """Flip the caller's live job to `cancelled`; a terminal job is left as it is."""
    job = await store.batch.job(job_id)
    if job is None or not owns(job, caller):
        return CancelOutcome(False, None)
    if job.status in TERMINAL:
        return CancelOutcome(False, job.status)
    before = await store.batch.cancel(job_id, now)
    if before is None:  # swept between the read and the write
        return CancelOutcome(False, None)
    cancelled = before.status not in TERMINAL
    if cancelled and nudge is not None:
        nudge()
    return CancelOutcome(cancelled, before.status)
