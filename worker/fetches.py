"""The fetches in flight of one worker and its slow lane (docs/WORKER.md §Handing off slow
targets, §Shutdown and supervision).

Each fetch runs in a task of its own, so that shutdown can let it finish within the grace
period and then cancel it while the drain still stores its outcome, and so that a slow one can
be handed off (who may: `worker.state.DrainState.lane_has_room`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sift.config import BatchConfig
from sift.gates import Permit, handed_over
from sift.log import batch_scope
from sift.store import Claim

FetchFn = Callable[[Claim], Awaitable[dict]]
Key = tuple[str, int]  # (job, target index)


class Fetches:
    def __init__(self, fetch: FetchFn, cfg: BatchConfig):
        self.fetch = fetch
        self.cfg = cfg
        self.tasks: set[asyncio.Task] = set()
        self.handed: dict[Key, asyncio.Task] = {}  # the slow lane: each handed-off target's
        self.cancelling = False  # the grace period is over

    def start(self, claim: Claim, permit: Permit | None = None) -> asyncio.Task:
        """Run the fetch of `claim` in a task of its own, holding `permit` (the gate slots its
        admission took) until the fetch adopts or ends it."""
        task = asyncio.create_task(self._as_batch(claim, permit), name=f"fetch {claim.job_id}")
        self.tasks.add(task)
        if self.cancelling:
            task.cancel()  # before its first step: `_as_batch` never runs to release the slots
            if permit is not None:
                permit.release()
        return task

    async def _as_batch(self, claim: Claim, permit: Permit | None) -> dict:
        # batch_scope: the pipeline's log lines name no URL or host for batch work
        with batch_scope(), handed_over(permit):
            return await self.fetch(claim)

    def let_go(self, task: asyncio.Task) -> None:
        """Shutdown stops counting the fetch; one still running (its waiter was cancelled) is
        cancelled."""
        self.tasks.discard(task)
        if not task.done():
            task.cancel()

    async def grace(self, seconds: float) -> None:
        """Let the fetches in flight finish within `seconds`, then cancel them."""
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=seconds)
        self.cancelling = True
        for task in list(self.tasks):
            task.cancel()
