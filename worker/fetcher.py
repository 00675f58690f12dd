"""The worker's fetch function: every batch target goes through the per-target pipeline.

`open_fetch(cfg, store)` yields the FetchFn the runner calls with each claimed target; it runs
the target as the job's caller (its whole identity, from the job row). The pipeline is opened once
per worker and closed at exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sift.auth import Caller
from sift.config import Config
from sift.fetch.target import Target
from sift.gates import Gates
from sift.store import Claim, Store
from worker.drain import FetchFn


@contextlib.asynccontextmanager
async def open_fetch(cfg: Config, store: Store, gates: Gates) -> AsyncIterator[FetchFn]:
    """`gates`: the drain's, so the slots it takes for a target are the ones the pipeline's
    acquire adopts (one slot table per process; docs/WORKER.md §The scheduler)."""
    from sift.fetch.pipeline import Pipeline  # the HTTP stack loads only in the worker

    pipeline = await Pipeline.open(cfg, store, gates=gates)

    async def fetch(claim: Claim) -> dict:
        caller = Caller.from_owner(claim.caller, claim.caller_class)
        target = Target.from_stored(claim.url, claim.options)
        return await pipeline.fetch_target(caller, target, background=True)

    try:
        yield fetch
    finally:
        await pipeline.close()
