"""Submitting a job (docs/WORKER.md §Submit, status, cancel), for the API process.

Validation and the pre-check run before the database is touched; the idempotency lookup, the
caps, the insert and the sweep then run as one write transaction in the store, so concurrent
submits can neither exceed a cap nor create two jobs for the same list. The nudge goes out only
after that transaction has committed, so a woken worker always finds the job.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from sift.auth import Caller
from sift.config import BatchConfig
from sift.errors import BadRequest, SiftError, TooManyRequests, Unprocessable
from sift.fetch.target import Target, parse_target
from sift.store import NewTarget, Store

Precheck = Callable[[str], None]  # raises sift.errors.Refused for a URL it refuses
Nudge = Callable[[], object]


@dataclass(frozen=True, slots=True)
class Submitted:
    job_id: str
    status: str
    targets: int
    reused: bool

    def body(self) -> dict:
        """The `202` body of docs/API.md §POST /v1/batch."""
        return {
            "success": True,
            "job_id": self.job_id,
            "status": self.status,
            "targets": self.targets,
            "reused": self.reused,
        }


def idem_key(caller: Caller, targets: Sequence[Target]) -> str:
    """Hex SHA-256 of the caller's identity (class, workspace, name), a NUL, and the canonical
    JSON of the target list: only the very same caller reuses a job."""
    canonical = orjson.dumps([t.canonical() for t in targets], option=orjson.OPT_SORT_KEYS)
    who = "\x00".join(caller.identity[::-1]).encode()
    return hashlib.sha256(who + b"\x00" + canonical).hexdigest()


def new_job_id() -> str:
    return secrets.token_hex(16)


def parse_targets(raw: Any, precheck: Precheck | None = None) -> list[Target]:
    """Validate every target in order; the first problem names its `idx`."""
    if not isinstance(raw, list):
        raise BadRequest('"targets" must be a list of target objects')
    if not raw:
        raise BadRequest("no targets: send at least one")
    targets = []
    for idx, obj in enumerate(raw):
        try:
            target = parse_target(obj)
            if precheck is not None:
                precheck(target.url)
        except SiftError as e:
            raise type(e)(f"target {idx}: {e.msg}", hint=e.hint, idx=idx) from None
        targets.append(target)
    return targets


async def submit(
    store: Store,
    cfg: BatchConfig,
    caller: Caller,
    raw_targets: Any,
    *,
    now: float,
    precheck: Precheck | None = None,
    nudge: Nudge | None = None,
) -> Submitted:
    """Create (or reuse) a job for `raw_targets`, the request's `targets` value."""
    targets = parse_targets(raw_targets, precheck)
    outcome = await store.batch.submit(
        job_id=new_job_id(),
        caller=caller.owner,
        caller_class=caller.cls,
        idem_key=idem_key(caller, targets),
        targets=[NewTarget(t.url, t.options_json()) for t in targets],
        now=now,
        ttl=cfg.ttl,
        targets_per_job=cfg.targets_per_job,
        jobs_per_caller=cfg.jobs_per_caller,
        jobs_total=cfg.jobs_total,
    )
    if outcome.kind == "too_many":
        raise Unprocessable(
            f"too many targets: {len(targets)} (at most {cfg.targets_per_job} per job); "
            "split the list into several jobs"
        )
    if outcome.kind == "caller_busy":
        raise TooManyRequests(
            f"caller busy: you already have {cfg.jobs_per_caller} live job(s), the most allowed; "
            "wait for one to finish or cancel it"
        )
    if outcome.kind == "jobs_busy":
        raise TooManyRequests(
            f"jobs busy: {cfg.jobs_total} jobs are live across all callers; try again later"
        )
    job = outcome.job
    assert job is not None, outcome.kind
    if outcome.kind == "created" and nudge is not None:
        nudge()
    return Submitted(job.id, job.status, job.targets_total, outcome.kind == "reused")
