"""Why a live job's pending targets wait, and how long the job may still take (docs/API.md
§Waiting targets): pure functions over the facts the store records (`sift.store.waits`).

Nothing here is guessed from the worker's memory: a reason is either what the store says
(a host's not-before time and its cause, a target's retry time and the reason the worker gave
when it put it back, the batch fetches in flight, the worker's heartbeat) or the one reason
left when none of those applies, the job's turn. The first reason that applies wins, in this
order: no live worker, the host's own wait, the target's retry time, another batch fetch on
the same host, a reason the worker gave in the last `RECENT` seconds, the turn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from yarl import URL

from sift.gates import host_key
from sift.status import TargetStatus
from sift.store import Job, Store, TargetRow
from sift.store.records import WaitFacts
from sift.timefmt import rfc3339

# Why a target waits (docs/API.md §Waiting targets).
HOST_BUSY = "host_busy"  # another batch fetch to its host is in flight, or its gates are full
CRAWL_DELAY = "crawl_delay"  # the site's robots.txt Crawl-delay spaces the fetches
RETRY_AFTER = "retry_after"  # the site said Retry-After, or Sift retries after a busy answer
ROBOTS = "robots"  # the site's robots.txt is being read
TURN = "turn"  # other work goes first: this job's earlier target, or other jobs' turns
WORKER_DOWN = "worker_down"  # no worker is running
REASONS = (HOST_BUSY, CRAWL_DELAY, RETRY_AFTER, ROBOTS, TURN, WORKER_DOWN)
RECENT = 10.0  # seconds a reason the worker gave at a put-back still explains the wait


class Waiting(NamedTuple):
    reason: str
    host: str
    until: float | None  # the time before which it cannot start, when one is known

    def wire(self) -> dict:
        """As a target's `waiting` field."""
        not_before = rfc3339(self.until) if self.until is not None else None
        return {"reason": self.reason, "host": self.host, "not_before": not_before}


def host_of(url: str) -> str:
    try:
        return host_key(URL(url).host or "")
    except ValueError:
        return ""


def explain(
    targets: Sequence[TargetRow], facts: WaitFacts, *, now: float, worker_up: bool
) -> dict[int, Waiting]:
    """Why each pending target of a live job waits, by idx."""
    busy_hosts = {host_of(u) for u in facts.running_urls}
    out: dict[int, Waiting] = {}
    ahead = any(t.status == TargetStatus.RUNNING for t in targets)  # the job is serial
    for t in targets:
        if t.status != TargetStatus.PENDING:
            continue
        host = host_of(t.url)
        if ahead:
            reason, until = (WORKER_DOWN, None) if not worker_up else (TURN, None)
        else:
            reason, until = _first(t, host, facts, busy_hosts, now=now, worker_up=worker_up)
            ahead = True  # the targets after the job's next one wait for it
        out[t.idx] = Waiting(reason, host, until)
    return out


def _first(
    t: TargetRow,
    host: str,
    facts: WaitFacts,
    busy_hosts: set[str],
    *,
    now: float,
    worker_up: bool,
) -> tuple[str, float | None]:
    if not worker_up:
        return WORKER_DOWN, None
    pace = facts.host_waits.get(host)
    if pace is not None and pace[0] > now:
        return (pace[1] if pace[1] in REASONS else CRAWL_DELAY), pace[0]
    retry_at, said = facts.pending.get(t.idx, (None, None))
    if retry_at is not None and retry_at > now:
        return (said if said in REASONS else RETRY_AFTER), retry_at
    if host in busy_hosts:
        return HOST_BUSY, None
    if said in REASONS and retry_at is not None and now - retry_at < RECENT:
        return said, None
    return TURN, None


def eta(
    job: Job,
    targets: Sequence[TargetRow],
    waiting: dict[int, Waiting],
    facts: WaitFacts,
    *,
    now: float,
    worker_up: bool,
    per_target_max: float,
) -> dict | None:
    """`{"min", "max"}` seconds until the job ends, or None when no bound can be given (no
    worker). The low end assumes the remaining targets go as fast as half the job's own
    average so far, with no other job in the way; the high end twice that average (or, before
    any target finished, `per_target_max`, the longest one target may take) per remaining
    target, each after one turn of every other live job. Both start after the next target's
    own wait (`not_before`)."""
    if not worker_up:
        return None
    remaining = sum(t.status in (TargetStatus.PENDING, TargetStatus.RUNNING) for t in targets)
    if remaining == 0:
        return {"min": 0, "max": 0}
    head = max((w.until - now for w in waiting.values() if w.until is not None), default=0.0)
    finished = sum(t.status in (TargetStatus.DONE, TargetStatus.FAILED) for t in targets)
    started = job.started_at
    average = (now - started) / finished if finished and started is not None else None
    low = average / 2 if average is not None else 0.0
    high = 2 * average if average is not None else per_target_max
    others = max(0, facts.live_jobs - 1)
    return {
        "min": math.floor(head + remaining * low),
        "max": math.ceil(head + remaining * high * (1 + others)),
    }


async def wait_fields(
    store: Store,
    job: Job,
    targets: Sequence[TargetRow],
    *,
    now: float,
    worker_up: bool,
    per_target_max: float,
) -> tuple[dict[int, dict], dict | None]:
    """A live job's `waiting` per pending target (wire form) and its `eta`, from one read."""
    facts = await store.waits.facts(job.id, now)
    waiting = explain(targets, facts, now=now, worker_up=worker_up)
    bounds = eta(
        job, targets, waiting, facts, now=now, worker_up=worker_up, per_target_max=per_target_max
    )
    return {idx: w.wire() for idx, w in waiting.items()}, bounds
