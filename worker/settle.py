"""What the drain does with a fetched target (docs/WORKER.md §Rotation and drain, Busy, and
§Spacing and waits): store it, or put it back to wait.

A host's spacing (`HostWait`) or a full gate met at fetch time puts the target back as it was,
not counted busy; a busy database puts it back until `retry_wait`, and after `retry_for` of
busy answers it is stored failed. Either way its job waits for it (target i+1 never starts
before target i is stored, retries included) and the scheduler skips the job until then. An
upstream's Retry-After holds the host that answered. A stored target charges its caller its
cost and, with `chain`, the same transaction claims the next target in the scheduler's order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sift.errors import GatesFull, HostWait
from sift.status import TargetStatus
from sift.store import Claim
from worker.hosts import host_of
from worker.outcome import BUSY, Outcome, key_of, who_of
from worker.scheduler import Skip, decide

if TYPE_CHECKING:
    from worker.drain import Runner


async def settle(runner: Runner, claim: Claim, outcome: Outcome, *, chain: bool) -> Claim | None:
    """Store the target (or put it back); the next target when one was claimed with it."""
    now = runner.clock()
    err = outcome.error
    host = host_of(claim.url)
    if isinstance(err, HostWait):  # the site's spacing: not busy, the busy clock waits
        runner.state.room.wait(host, err.retry_after or now, Skip.CRAWL_DELAY)
        runner.state.room.remember(claim.job_id, claim.caller, host)
        await put_back(runner, claim, now, claim.busy_since, now)
        return None
    if outcome.status == BUSY:
        busy_since = claim.busy_since if claim.busy_since is not None else now
        if now - busy_since <= runner.cfg.retry_for:
            if isinstance(err, GatesFull):  # a gate filled between the look and the fetch
                runner.state.room.remember(claim.job_id, claim.caller, host)
                await put_back(runner, claim, now, busy_since, now, Skip.HOST_BUSY)
            else:  # the database was busy: try again after `retry_wait`
                retry_at = now + runner.cfg.retry_wait
                await put_back(runner, claim, retry_at, busy_since, now, Skip.RETRY_AFTER)
            return None
        err.retry_after = now + runner.cfg.retry_wait
        outcome = replace(outcome, status=str(TargetStatus.FAILED))
    elif err is not None and err.retry_after is not None and "upstream_status" in err.extra:
        runner.state.room.wait(err.answered_by or host, err.retry_after, Skip.RETRY_AFTER)
    runner.state.stored(key_of(claim), who_of(claim), outcome.seconds)
    following: list[str] = []
    if chain and not runner.stopping:
        await runner.refresh_if_due()  # a job submitted meanwhile takes its turn
        snap = runner.state.snapshot(runner.clock(), mine=claim.job_id)
        following = list(decide(snap).order)
    nxt = await runner.writes.finish(claim, outcome, now, following)
    runner.state.done(key_of(claim))
    return nxt


async def put_back(
    runner: Runner,
    claim: Claim,
    retry_at: float,
    busy_since: float | None,
    now: float,
    reason: Skip | None = None,
) -> None:
    runner.state.put_back(key_of(claim), who_of(claim), retry_at if retry_at > now else None)
    await runner.writes.put_back(claim, retry_at, busy_since, now, reason)
    runner.state.done(key_of(claim))
