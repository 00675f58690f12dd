"""What one fetch comes to (docs/WORKER.md §Rotation and drain, Outcomes), and the log lines a
stored target gives: never a URL, a host or an error text."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import orjson

from sift.auth import RESTRICTED
from sift.errors import Busy, Cancelled, TargetError
from sift.log import batch_event
from sift.status import TargetStatus
from sift.store import Claim, Finished, StoreBusy
from worker.fairness import Who

BUSY = "busy"  # an outcome that is not stored: the target goes back to wait
INTERNAL_ERROR = "internal error"
SHUTDOWN_ERROR = "cancelled: the worker shut down"

log = logging.getLogger("sift.worker.drain")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one fetch comes to: how the target is stored, or that it was only busy."""

    status: str  # done | failed | BUSY
    label: str  # the metrics outcome
    seconds: float
    result: str | None = None
    error: TargetError | None = None


def judge(task: asyncio.Task, seconds: float, claim: Claim) -> Outcome:
    """The outcome of a finished fetch task (docs/WORKER.md §Rotation and drain, Outcomes)."""
    if task.cancelled():
        exc: BaseException | None = Cancelled(SHUTDOWN_ERROR)
    else:
        exc = task.exception()
    if exc is None:
        try:
            result = orjson.dumps(task.result()).decode()
        except TypeError as e:
            exc = e
        else:
            return Outcome(str(TargetStatus.DONE), "ok", seconds, result=result)
    if isinstance(exc, StoreBusy):  # the pipeline's cache write waited out another lock
        exc = Busy(exc.msg)
    if isinstance(exc, Busy):
        return Outcome(BUSY, exc.outcome or "other", seconds, error=exc)
    if not isinstance(exc, TargetError):
        batch_event(
            log,
            "batch target internal error",
            level=logging.WARNING,
            job_id=claim.job_id,
            idx=claim.idx,
            error_type=type(exc).__name__,
        )
        exc = TargetError(INTERNAL_ERROR, hint=None)
    return Outcome(str(TargetStatus.FAILED), exc.outcome or "other", seconds, error=exc)


def log_stored(claim: Claim, outcome: Outcome, finished: Finished) -> None:
    """The lines a stored target gives: stored (or not), the job's end, an eviction."""
    if not finished.stored:
        batch_event(log, "batch target not stored: job gone", job_id=claim.job_id, idx=claim.idx)
        return
    # A restricted caller's line carries no reason, not even the outcome's category.
    shown = {} if claim.caller_class == RESTRICTED else {"outcome": outcome.label}
    batch_event(
        log,
        "batch target stored",
        job_id=claim.job_id,
        idx=claim.idx,
        status=outcome.status,
        **shown,
    )
    if finished.terminal:
        batch_event(log, "batch job finished", job_id=claim.job_id, status=finished.terminal)
    if finished.evicted:
        batch_event(log, "batch byte budget evicted jobs", count=finished.evicted)


def who_of(claim: Claim) -> Who:
    return (claim.caller, claim.caller_class)


def key_of(claim: Claim) -> tuple[str, int]:
    return (claim.job_id, claim.idx)
