"""Ending a job's targets as the worker would, for tests of what the API shows afterwards."""

from __future__ import annotations

import orjson

# outcome -> (error, hint, retryable) of a failed target; any other outcome fails like `timeout`.
FAILURES = {
    "timeout": ("upstream timed out", "retry", True),
    "upstream_4xx": ("upstream answered HTTP 404", "recover", False),
}


async def finish_all(store, job_id: str, now: float, outcomes: list[str]) -> None:
    """Claim each target in turn and store its outcome: `ok`, or a failure (`FAILURES`)."""
    for outcome in outcomes:
        claim = await store.batch.claim(job_id, now)
        if outcome == "ok":
            envelope = orjson.dumps({"success": True, "url": claim.url, "content": "x" * 10})
            await store.batch.finish(
                job_id,
                claim.idx,
                status="done",
                outcome="ok",
                seconds=0.1,
                now=now,
                result=envelope.decode(),
            )
        else:
            error, hint, retryable = FAILURES.get(outcome, FAILURES["timeout"])
            await store.batch.finish(
                job_id,
                claim.idx,
                status="failed",
                outcome=outcome,
                seconds=0.1,
                now=now,
                error=error,
                hint=hint,
                retryable=retryable,
            )
