"""Submitting jobs straight to a batch store, for the store tests of either engine."""

from __future__ import annotations

import json

from sift.store.records import NewTarget

TTL = 86_400.0
ROOMY = {"targets_per_job": 32, "jobs_per_caller": 100, "jobs_total": 100}


def targets(n: int, tag: str = "") -> list[NewTarget]:
    return [
        NewTarget(f"http://127.0.0.1:9/{tag}{i}", json.dumps({"mode": "clean", "n": i}))
        for i in range(n)
    ]


async def submit(
    batch, job_id, now, n=2, *, caller="alice", caller_class="fleet", key=None, ttl=TTL, **caps
):
    """A job of `n` targets under roomy caps (override any with `caps`)."""
    return await batch.submit(
        job_id=job_id,
        caller=caller,
        caller_class=caller_class,
        idem_key=key or f"key-{job_id}",
        targets=targets(n),
        now=now,
        ttl=ttl,
        **{**ROOMY, **caps},
    )
