"""What the drain knows, as plain data (docs/WORKER.md §The scheduler): the live jobs, the
callers' virtual times, the targets in flight here, the hosts' room and waits.

The drain (worker/drain.py) and the simulation (tests/unit/test_worker_simulation.py) keep the
same state with the same methods and ask `worker.scheduler.decide` the same question; only the
drain does I/O. Time is passed in (`now`) everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from sift.gates import Gates
from worker.fairness import Ledger, Who
from worker.hosts import HostRoom
from worker.scheduler import Job, Running, Snapshot, decide

Key = tuple[str, int]  # (job, target index)


class DrainState:
    def __init__(self, gates: Gates | None, *, shared: bool = False):
        """`shared`: other workers take targets from the same store (engine postgres)."""
        self.shared = shared
        self.room = HostRoom(gates)
        self.ledger = Ledger()
        self.jobs: dict[str, Job] = {}  # the live jobs, from the last refresh
        self.running: dict[Key, Running] = {}  # targets in flight here, handed off included
        self.handed: set[Key] = set()  # of those, the ones handed off
        self._seq = 0
        self._turns = 0
        self._caller_turn: dict[Who, int] = {}

    def adopt(self, owned: Iterable[tuple[str, str, str]], now: float) -> bool:
        """The store's live jobs, (id, caller, class) in submit order; True when one is new.
        A job keeps its turn and state; an ended job is forgotten."""
        jobs: dict[str, Job] = {}
        for job_id, caller, cls in owned:
            known = self.jobs.get(job_id)
            if known is None:
                self._seq += 1
                known = Job(job_id, (caller, cls), self._seq)
            jobs[job_id] = known
        added = bool(jobs.keys() - self.jobs.keys())
        self.jobs = jobs
        self.room.retain(set(jobs), now)
        if self.shared:
            # Another worker may have taken the target whose host is remembered: a claim
            # shows the job's next one again (docs/WORKER.md §The scheduler).
            self.room.forget_all()
        return added

    def snapshot(self, now: float, tried: Iterable[str] = (), mine: str | None = None) -> Snapshot:
        """The scheduler's input at `now`; `mine`, a job whose target is being stored, counts
        as ready for the chained claim."""
        jobs = tuple(self._view(job, mine) for job in self.jobs.values())
        return Snapshot(
            now=now,
            jobs=jobs,
            vtime=self.ledger.vtime(),
            floor=self.ledger.floor,
            running=tuple(self.running.values()),
            caller_turn=dict(self._caller_turn),
            no_room=self.room.no_room(),
            waits=self.room.waits(),
            exclude=frozenset(tried),
            handed=frozenset(self.running[k].who for k in self.handed if k in self.running),
        )

    def _view(self, job: Job, mine: str | None) -> Job:
        host = self.room.next_host(job.job_id)
        if host == job.host and job.job_id != mine:
            return job
        return replace(job, host=host, in_flight=job.in_flight and job.job_id != mine)

    def mark(self, job_id: str, **changes) -> None:
        if job_id in self.jobs:
            self.jobs[job_id] = replace(self.jobs[job_id], **changes)

    def started(self, key: Key, who: Who, now: float, host: str) -> None:
        """A claimed target starts (on `host`): its job is in flight, its caller charged one
        quantum."""
        self.room.took(key[0], who[0], host)
        self.ledger.start(who)
        self.running[key] = Running(who, now)
        self.mark(key[0], in_flight=True)

    def handed_off(self, key: Key) -> None:
        """The target goes on in the slow lane, slow or yielded at once: until it is stored its
        caller goes after the callers with none there (docs/WORKER.md §Handing off slow
        targets)."""
        self.handed.add(key)

    def lane_has_room(self, who: Who, now: float, lanes: int) -> bool:
        """Fewer than `lanes` targets handed off, and none of them `who`'s unless another
        caller has a ready job (docs/WORKER.md §Handing off slow targets): a second slow target
        of one caller then frees the drain task for that job rather than hold it."""
        if len(self.handed) >= lanes:
            return False
        if all(self.running[k].who != who for k in self.handed if k in self.running):
            return True
        return self.others_ready(who, now)

    def must_yield(self, who: Who, now: float, lanes: int, tasks: int) -> bool:
        """A target of `who` on a drain task moves to the slow lane at once: every one of the
        `tasks` drain tasks holds a target, so the ready job of another caller with no target
        in the lane would wait for one, and the lane has a place (docs/WORKER.md §Handing off
        slow targets). A caller with a target in the lane has a place already: yielding to it
        could fill the lane with one caller's targets and leave the next caller none. A job
        whose last target's host has no room now (`HostRoom.likely_busy`) is not counted: its
        claim would most likely be refused, and the move would cost the chained claim."""
        if len(self.handed) >= lanes or len(self.running.keys() - self.handed) < tasks:
            return False
        placed = {self.running[k].who for k in self.handed if k in self.running} | {who}
        if not any(job.who not in placed for job in self.jobs.values()):
            return False  # no such caller has a live job: spare the scheduler's probes
        order = decide(self.snapshot(now)).order
        waiting = (j for j in order if self.jobs[j].who not in placed)
        # The lane has a place (above), and another caller has a ready job: `lane_has_room`
        # holds without asking the scheduler again.
        return not all(self.room.likely_busy(j, now) for j in waiting)

    def others_live(self, who: Who) -> bool:
        """Another caller has a live job here."""
        return any(job.who != who for job in self.jobs.values())

    def wake_at(self, now: float) -> float | None:
        """When the earliest timed wait ends (a job may become ready then)."""
        return decide(self.snapshot(now)).wake_at

    def others_ready(self, who: Who, now: float) -> bool:
        """A caller other than `who` has a job ready to start now."""
        order = decide(self.snapshot(now)).order
        return any(self.jobs[j].who != who for j in order)

    def since(self, key: Key) -> float:
        return self.running[key].since

    def stored(self, key: Key, who: Who, seconds: float) -> None:
        """A target is about to be stored: its cost is charged and its job and caller have
        had their turn (what a put-back target does not do)."""
        self.running.pop(key, None)
        self.handed.discard(key)
        self.ledger.finish(who, seconds)
        self._turns += 1
        self._caller_turn[who] = self._turns
        self.mark(key[0], turn=self._turns)

    def put_back(self, key: Key, who: Who, retry_at: float | None = None) -> None:
        """A target goes back to wait (busy, a host wait): it costs nothing, takes no turn."""
        self.handed.discard(key)
        if self.running.pop(key, None) is not None:
            self.ledger.refund(who)
        if retry_at is not None:
            self.mark(key[0], retry_at=retry_at)

    def release(self, job_id: str) -> None:
        """A claim of the job came to nothing: it is not in flight, unless a target of it
        runs here (a chained claim took it meanwhile)."""
        if not any(k[0] == job_id for k in self.running):
            self.mark(job_id, in_flight=False)

    def done(self, key: Key) -> None:
        """The target is stored or put back: its job may go again."""
        self.running.pop(key, None)
        self.handed.discard(key)
        self.mark(key[0], in_flight=False)
