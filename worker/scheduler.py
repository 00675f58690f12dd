"""Which job's next target starts now (docs/WORKER.md §The scheduler): one pure function.

`decide(snapshot)` reads the live jobs with their callers, what is in flight, each caller's
virtual time, the gates' room, the hosts' waits and the retry times, and returns the job whose
next target a free drain task should claim, why every other job waits, and when the earliest
wait ends. The drain (worker/drain.py) is a loop around it; the simulation in
tests/unit/test_worker_simulation.py drives the same function with a virtual clock.

The discipline is start-time fair queuing over callers (SFQ: Goyal, Vin and Cheng, SIGCOMM
1996) with round robin over a caller's jobs, charging each target after the fact (its length is
not known when it starts). `worker/fairness.py` keeps the virtual times. Before the fair order
comes one rule: a caller with a target handed off here goes after every caller with none
(docs/WORKER.md §Handing off slow targets): its next target, if slow too, has no place of its
own in the slow lane and could hold a drain task for a render limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from worker.fairness import QUANTUM, Who, charge


class Skip(StrEnum):
    """Why a live job's next target does not start now."""

    HOST_BUSY = "host_busy"  # the gates have no room for a batch fetch to its host
    CRAWL_DELAY = "crawl_delay"  # its host's Crawl-delay spacing has not passed
    RETRY_AFTER = "retry_after"  # its host said when (429/503), or a busy target's retry time
    ROBOTS = "robots"  # its host's robots.txt must be read again first (not produced yet)
    TURN = "turn"  # ready, but another job goes first: fair shares, then round robin


@dataclass(frozen=True, slots=True)
class Job:
    """A live job as the scheduler sees it."""

    job_id: str
    who: Who
    seq: int  # submit order
    turn: int = 0  # the drain's turn count when it last started a target; 0: never
    in_flight: bool = False  # a target of it is being fetched (here, or handed off)
    retry_at: float = -math.inf  # a busy target may be tried again from then
    host: str | None = None  # its next target's host, once a claim has shown it


@dataclass(frozen=True, slots=True)
class Running:
    """A target in flight in this process: its caller, and since when (its cost so far)."""

    who: Who
    since: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    jobs: tuple[Job, ...]
    vtime: Mapping[Who, float]  # each caller's virtual time, stored charges (fairness.Ledger)
    floor: float = 0.0  # the system's virtual time: nobody is counted below it
    running: tuple[Running, ...] = ()
    caller_turn: Mapping[Who, int] = field(default_factory=dict)  # last start of each caller
    no_room: frozenset[tuple[str, str]] = frozenset()  # (caller, host) the gates refuse now
    waits: Mapping[str, tuple[float, Skip]] = field(default_factory=dict)  # host -> until, why
    exclude: frozenset[str] = frozenset()  # tried in this scan: claimed elsewhere, or no room
    handed: frozenset[Who] = frozenset()  # callers with a target handed off here, still running


@dataclass(frozen=True, slots=True)
class Decision:
    order: tuple[str, ...]  # the ready jobs, the one to start first
    reasons: Mapping[str, Skip]  # every other live job not in flight, and why it waits
    wake_at: float | None  # the earliest end of a timed wait (None: only a nudge or a slot)

    @property
    def job_id(self) -> str | None:
        return self.order[0] if self.order else None


def decide(s: Snapshot) -> Decision:
    """The ready jobs in the order their targets should start, and why the others wait."""
    reasons: dict[str, Skip] = {}
    ready: list[Job] = []
    ends: list[float] = []
    for job in s.jobs:
        if job.in_flight:
            continue  # serial per job
        why, until = waiting(job, s)
        if why is None:
            if job.job_id not in s.exclude:  # not tried in this scan already
                ready.append(job)
            continue
        reasons[job.job_id] = why
        if until is not None:
            ends.append(until)
    vt = virtual_times(s)
    ready.sort(
        key=lambda j: (
            j.who in s.handed,
            vt.get(j.who, s.floor),
            s.caller_turn.get(j.who, 0),
            j.turn,
            j.seq,
        )
    )
    for job in ready[1:]:
        reasons[job.job_id] = Skip.TURN
    return Decision(tuple(j.job_id for j in ready), reasons, min(ends, default=None))


def waiting(job: Job, s: Snapshot) -> tuple[Skip | None, float | None]:
    """Why the job's next target cannot start now, and until when (None: until a slot frees)."""
    if job.retry_at > s.now:
        return Skip.RETRY_AFTER, job.retry_at
    if job.host is None:
        return None, None  # not known before its claim: the claim shows it
    until, why = s.waits.get(job.host, (-math.inf, Skip.RETRY_AFTER))
    if until > s.now:
        return why, until
    if (job.who[0], job.host) in s.no_room:
        return Skip.HOST_BUSY, None
    return None, None


def virtual_times(s: Snapshot) -> dict[Who, float]:
    """Each caller's virtual time now: its stored charges, never below the floor (no credit
    is banked while away), plus what its targets in flight have run beyond the quantum their
    start already charged."""
    vt = {who: max(t, s.floor) for who, t in s.vtime.items()}
    for r in s.running:
        extra = charge(s.now - r.since) - QUANTUM
        vt[r.who] = vt.get(r.who, s.floor) + extra
    return vt
