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
    retry_of: str | None = None

    def body(self) -> dict:
        """The `202` body (docs/API.md §POST /v1/batch)."""
        body = {
            "success": True,
            "job_id": self.job_id,
            "status": self.status,
            "targets": self.targets,
            "reused": self.reused,
        }
        if self.reused:
            body["note"] = REUSED_NOTE.format(status=self.status, job_id=self.job_id)
        if self.retry_of is not None:
            body["retry_of"] = self.retry_of
        return body


# A reused job may have ended `partial`: the reply must make the way to a new job obvious.
REUSED_NOTE = (
    "this list was submitted before: this is that job (status {status}), not a new one; "
    'send "fresh": true (sift batch submit --fresh) for a new job, or retry its failed '
    "targets with POST /v1/batch/{job_id}/retry"
)


def idem_key(caller: Caller, targets: Sequence[Target]) -> str:
    """Hex SHA-256 of the caller's identity (class, workspace, name), a NUL, and the canonical
    JSON of the target list: only the very same caller reuses a job."""
    canonical = orjson.dumps([t.canonical() for t in targets], option=orjson.OPT_SORT_KEYS)
    who = "\x00".join(caller.identity[::-1]).encode()
    return hashlib.sha256(who + b"\x00" + canonical).hexdigest()


def new_job_id() -> str:
    return secrets.token_hex(16)


def submit_fields(body: Any) -> tuple[Any, bool]:
    """(targets, fresh) of a submit body: `{"targets": [...], "fresh": bool, "webhook": ...}`
    or a bare list (the webhook is `sift.batch.webhook`'s to read)."""
    if isinstance(body, list):
        return body, False
    unknown = sorted(set(body) - {"targets", "fresh", "webhook"})
    if unknown:
        raise BadRequest(
            f'unknown field {unknown[0]!r}; expected {{"targets": [...], "fresh": false}} '
            "or a bare list of targets"
        )
    if "targets" not in body:
        raise BadRequest('"targets" is required: a list of target objects or URL strings')
    fresh = body.get("fresh", False)
    if not isinstance(fresh, bool):
        raise BadRequest('"fresh" must be true or false')
    return body["targets"], fresh


def parse_targets(raw: Any, precheck: Precheck | None = None) -> list[Target]:
    """Validate every target in order (a plain string is a URL); the first problem names its
    `idx`."""
    if not isinstance(raw, list):
        raise BadRequest('"targets" must be a list of target objects or URL strings')
    if not raw:
        raise BadRequest("no targets: send at least one")
    targets = []
    for idx, obj in enumerate(raw):
        try:
            target = parse_target({"url": obj} if isinstance(obj, str) else obj)
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
    fresh: bool = False,
    retry_of: str | None = None,
    webhook: tuple | None = None,  # (url, event types, results)
) -> Submitted:
    """Create (or reuse, unless `fresh`) a job for `raw_targets`, the request's targets; a
    created job keeps `webhook` (a reused one keeps its own)."""
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
        fresh=fresh,
        retry_of=retry_of,
        webhook=webhook,
    )
    if outcome.kind == "too_many":
        raise Unprocessable(
            f"too many targets: {len(targets)} (at most {cfg.targets_per_job} per job); "
            "split the list into several jobs"
        )
    if outcome.kind == "caller_busy":
        raise TooManyRequests(
            f"caller busy: your job {outcome.live_job} is still live (at most "
            f"{cfg.jobs_per_caller} live job(s) per caller); wait for it "
            f"(GET /v1/batch/{outcome.live_job}?wait=60) or cancel it, then submit",
            job_id=outcome.live_job,
        )
    if outcome.kind == "jobs_busy":
        raise TooManyRequests(
            f"jobs busy: {cfg.jobs_total} jobs are live across all callers; try again later"
        )
    job = outcome.job
    assert job is not None, outcome.kind
    if outcome.kind == "created" and nudge is not None:
        nudge()
    return Submitted(job.id, job.status, job.targets_total, outcome.kind == "reused", retry_of)
