"""`POST /v1/batch/{id}/retry`: a new job from the failed targets of an ended job (docs/API.md
§POST /v1/batch/{id}/retry).

"Failed" means every target that did not succeed: the failed ones, and the ones a cancel or a
worker restart left unfetched (`pending`), which have not been tried at all and so are always
worth trying. The new job keeps each target's options and their order (new idx 0..n-1) and goes
through the same validation, pre-check and caps as a submit. It is always a new job (never an
idempotent reuse), and it is linked both ways: its status says `retry_of`, the old job's
`retries`. It keeps the old job's webhook unless the body names another (or `null`): whoever
was told of the first job's end wants to hear of its retry's.
"""

from __future__ import annotations

from sift.auth import Caller
from sift.batch.jobs import JOB_NOT_FOUND, read_status
from sift.batch.submit import Nudge, Precheck, Submitted, submit
from sift.config import BatchConfig
from sift.errors import BadRequest, Conflict, NotFound, Unprocessable
from sift.fetch.target import Target
from sift.status import TargetStatus
from sift.store import Store, TargetRow


def retry_fields(body: dict) -> bool:
    """`only_retryable` of a retry body (`{}` or `{"only_retryable": bool, "webhook": …}`; the
    webhook is `sift.batch.webhook`'s to read)."""
    unknown = sorted(set(body) - {"only_retryable", "webhook"})
    if unknown:
        raise BadRequest(
            f'unknown field {unknown[0]!r}; expected {{"only_retryable": false, "webhook": …}}'
        )
    only_retryable = body.get("only_retryable", False)
    if not isinstance(only_retryable, bool):
        raise BadRequest('"only_retryable" must be true or false')
    return only_retryable


def is_retryable(row: TargetRow) -> bool:
    """A target worth trying again as it is: one never fetched, or a failure whose stored
    `retryable` flag says so where the store keeps one, else whose hint is `retry` (busy, timed
    out, or upstream said not now)."""
    if row.status != TargetStatus.FAILED:
        return True
    flag = getattr(row, "retryable", None)
    return bool(flag) if flag is not None else row.hint == "retry"


async def retry(
    store: Store,
    cfg: BatchConfig,
    caller: Caller,
    job_id: str,
    *,
    only_retryable: bool = False,
    now: float,
    precheck: Precheck | None = None,
    nudge: Nudge | None = None,
    webhook: tuple | None = None,
) -> Submitted:
    view = await read_status(store, job_id, caller, results=False)
    if view is None:
        raise NotFound(JOB_NOT_FOUND)
    if not view.terminal:
        raise Conflict(
            f"job still live: {view.job.status}; wait for it to end or cancel it, then retry",
            status=view.job.status,
        )
    failed = [
        t
        for t in view.targets
        if t.status != TargetStatus.DONE and (not only_retryable or is_retryable(t))
    ]
    if not failed:
        which = "retryable failed" if only_retryable else "failed or unfetched"
        raise Unprocessable(f"nothing to retry: job {job_id} has no {which} targets")
    targets = [Target.from_stored(t.url, t.options).canonical() for t in failed]
    return await submit(
        store,
        cfg,
        caller,
        targets,
        now=now,
        precheck=precheck,
        nudge=nudge,
        fresh=True,
        retry_of=job_id,
        webhook=webhook,
    )
