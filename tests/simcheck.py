"""Every guarantee of docs/WORKER.md §The scheduler's guarantees, checked after every event of
a simulated run (tests/sim.py), from the simulation's ground truth (the shared store, gates and
host waits), not from the scheduler's own view. A failed check raises `Broken`; `shrink` then
finds a smaller workload that still breaks it, for a short trace."""

from __future__ import annotations

import math
from dataclasses import replace

from tests.sim import POLL, Setup, Sim, Submit
from worker.fairness import QUANTUM
from worker.scheduler import virtual_times

EPS = 1e-9


class Broken(AssertionError):
    pass


class Checker:
    def __init__(self, setup: Setup):
        self.setup = setup
        self.idle_since: dict[int, float] = {}  # worker -> since when it idles with work ready
        self.last_start: dict[str, float] = {}  # host -> last network start
        self.lag: dict[str, dict[str, int]] = {}  # waiting caller -> others' allowances
        self.turn_at_start: dict[tuple[str, int], int] = {}
        self.starts: list[tuple[str, tuple[str, int]]] = []  # (caller, key) in start order
        self.stored_at: dict[tuple[str, int], float] = {}  # key -> when it was stored
        self.ended_at: dict[str, float] = {}  # job -> when its last target was stored

    # -- 1. work-conserving ---------------------------------------------------------------------

    def ready_jobs(self, sim: Sim) -> list[str]:
        """Jobs whose next target could start now: claimable, its host not waiting, room."""
        out = []
        for job in sim.store.jobs.values():
            idx = sim.store.claimable(job.id, sim.now)
            if idx is None:
                continue
            host = job.specs[idx].host
            if sim.not_before.get(host, -math.inf) <= sim.now and sim.gates.room(job.who, host):
                out.append(job.id)
        return out

    def work_conserving(self, sim: Sim) -> None:
        ready = self.ready_jobs(sim)
        # One worker hears of everything at once; another worker's freed slot reaches it by
        # the poll timer (the wake latency, docs/WORKER.md §The scheduler's guarantees).
        latency = 0.0 if len(sim.workers) == 1 else POLL
        for w in sim.workers:
            if ready and None in w.tasks:
                since = self.idle_since.setdefault(w.n, sim.now)
                if sim.now - since > latency + EPS:
                    raise Broken(f"1: w{w.n} idle since {since:.3f} with {ready} ready")
            else:
                self.idle_since.pop(w.n, None)

    # -- 2. serial per job ------------------------------------------------------------------------

    def on_claim(self, sim: Sim, w, key: tuple[str, int]) -> None:
        job = sim.store.jobs[key[0]]
        if "running" in job.status:
            raise Broken(f"2: {key} claimed while a target of its job is in flight")
        if any(s not in ("done", "failed") for s in job.status[: key[1]]):
            raise Broken(f"2: {key} claimed before an earlier target was stored")

    # -- 4. bounded lag, and 6. gates and waits ------------------------------------------------

    def on_start(self, sim: Sim, w, fetch) -> None:
        job = w.state.jobs[fetch.key[0]]
        self.turn_at_start[fetch.key] = job.turn
        self.starts.append((fetch.who, fetch.key))
        self.handed_goes_after(sim, w, fetch)
        if not self.lag:
            return
        # Still waiting now: this event may have made a caller's job wait (a 429 stored).
        ready = {sim.store.jobs[j].who for j in self.ready_jobs(sim)}
        for waiting, allowance in self.lag.items():
            if waiting == fetch.who or waiting not in ready:
                continue
            left = allowance.setdefault(fetch.who, self.allowance(sim, waiting, fetch.who, 1))
            allowance[fetch.who] = left - 1
            if left - 1 < 0:
                raise Broken(f"4: {fetch.who} started past its share while {waiting} waited")

    def allowance(self, sim: Sim, waiting: str, other: str, started: int = 0) -> int:
        """Starts `other` may make while `waiting` is ready: the whole quanta it is behind, +1
        (a tie may go its way); `started`: the start being counted already raised it."""
        snap = sim.workers[0].state.snapshot(sim.now)
        vt = virtual_times(snap)
        mine = vt.get((waiting, "user"), snap.floor)
        theirs = vt.get((other, "user"), snap.floor) - started * QUANTUM
        return math.floor((mine - theirs) / QUANTUM + EPS) + 1

    def bounded_lag(self, sim: Sim) -> None:
        if len(sim.workers) != 1:
            return  # each worker keeps its own virtual times: the bound is per worker
        w = sim.workers[0]
        busy = {f.who for f in w.tasks if f is not None} | {f.who for f in w.handed.values()}
        waiting = {sim.store.jobs[j].who for j in self.ready_jobs(sim)} - busy
        self.lag = {c: self.lag.get(c, {}) for c in waiting}

    def on_network(self, sim: Sim, host: str, who: str) -> None:
        s = self.setup
        delay = s.crawl_delay.get(host, 0.0)
        if sim.now < self.last_start.get(host, -math.inf) + delay - EPS:
            raise Broken(f"6: {host} started inside its Crawl-delay")
        self.last_start[host] = sim.now
        limit = s.per_host.get(host, 2)
        if sim.gates.host.get(host, 0) >= max(1, limit - (1 if limit > 1 else 0)) + 1:
            raise Broken(f"6: {host} over its batch slots")

    def on_stored(self, sim: Sim, w, fetch) -> None:
        self.stored_at[fetch.key] = sim.now
        if not sim.store.jobs[fetch.key[0]].live():
            self.ended_at[fetch.key[0]] = sim.now

    def on_put_back(self, sim: Sim, w, fetch) -> None:
        job = w.state.jobs.get(fetch.key[0])
        if job is not None and job.turn != self.turn_at_start.get(fetch.key, job.turn):
            raise Broken(f"6: {fetch.key} put back but its job lost its place")
        for allowance in self.lag.values():
            if fetch.who in allowance:
                allowance[fetch.who] += 1  # it did not run: its start is not counted

    # -- 7. a caller with a target handed off goes after ----------------------------------------

    def handed_goes_after(self, sim: Sim, w, fetch) -> None:
        """No target of a caller with one handed off on this worker starts while a caller with
        none there has a ready job (per worker: another worker's lane is not seen)."""
        if len(sim.workers) != 1:
            return
        handed = {f.who for f in w.handed.values()}
        if fetch.who not in handed:
            return
        others = [j for j in self.ready_jobs(sim) if sim.store.jobs[j].who not in handed]
        if others:
            raise Broken(f"7: {fetch.key} of {fetch.who} started while {others} were ready")

    def no_task_held_from_a_ready_caller(self, sim: Sim) -> None:
        """Every task holds a target while a caller with none in the lane has a ready job
        and the lane has a place: a target of another caller moves there at once (per worker:
        another worker may take the job)."""
        if len(sim.workers) != 1:
            return
        w = sim.workers[0]
        if None in w.tasks or len(w.handed) >= self.setup.slow_targets:
            return
        placed = {f.who for f in w.handed.values()}
        jobs = [sim.store.jobs[j] for j in self.ready_jobs(sim)]
        ready = {j.who for j in jobs if not self.guessed_busy(sim, w, j)} - placed
        for fetch in w.tasks:
            if ready - {fetch.who}:
                raise Broken(f"7: {fetch.key} holds its task while {ready} are ready")

    @staticmethod
    def guessed_busy(sim: Sim, w, job) -> bool:
        """The drain's guess before a claim shows a job's next host: the host of its last
        target waits or has no room now (worker.hosts.HostRoom.likely_busy)."""
        idx = job.next_idx()
        if not idx or w.state.room.next_host(job.id) is not None:
            return False
        host = job.specs[idx - 1].host
        return sim.not_before.get(host, -math.inf) > sim.now or not sim.gates.room(job.who, host)

    def on_hand_off(self, sim: Sim, w, fetch) -> None:
        """A caller's second target goes to the lane only while another caller is ready."""
        if len(sim.workers) != 1 or all(f.who != fetch.who for f in w.handed.values()):
            return
        # The drain sees a job end at its next refresh (at most POLL later).
        others = [
            j
            for j in sim.store.jobs.values()
            if j.who != fetch.who
            and "running" not in j.status
            and (j.live() or sim.now - self.ended_at.get(j.id, -math.inf) <= POLL + EPS)
        ]
        if not others:
            raise Broken(f"5: {fetch.key} handed off beside its caller's own, nobody waiting")

    # -- 5. the knob ------------------------------------------------------------------------------

    def knob(self, sim: Sim) -> None:
        for w in sim.workers:
            if len(w.handed) > self.setup.slow_targets:
                raise Broken(f"5: w{w.n} has {len(w.handed)} targets handed off")
        if sim.gates.total > max(1, self.setup.global_ - 1):
            raise Broken("6: over the global batch slots")

    def after_event(self, sim: Sim) -> None:
        self.work_conserving(sim)
        self.no_task_held_from_a_ready_caller(sim)
        self.bounded_lag(sim)
        self.knob(sim)


def simulate(setup: Setup, subs: list[Submit], *, until: float = 3600.0) -> tuple[Sim, str]:
    """The run and the first guarantee it broke ("" when none)."""
    sim = Sim(setup, subs, Checker(setup))
    try:
        sim.run(until)
    except Broken as e:
        return sim, str(e)
    left = [j.id for j in sim.store.jobs.values() if j.live()]
    return sim, f"1: jobs never finished: {left}" if left else ""


def run(setup: Setup, subs: list[Submit], *, until: float = 3600.0) -> Sim:
    sim, error = simulate(setup, subs, until=until)
    if error:
        raise Broken(error)
    return sim


def shrink(setup: Setup, subs: list[Submit]) -> list[Submit]:
    """A smaller workload that still breaks a guarantee: drop whole jobs, then targets."""

    def breaks(candidate: list[Submit]) -> bool:
        return bool(simulate(setup, candidate)[1])

    changed = True
    while changed:
        changed = False
        for i in range(len(subs)):
            fewer = subs[:i] + subs[i + 1 :]
            if fewer and breaks(fewer):
                subs, changed = fewer, True
                break
        for i, sub in enumerate(subs):
            for t in range(len(sub.targets)):
                targets = sub.targets[:t] + sub.targets[t + 1 :]
                fewer = [*subs[:i], replace(sub, targets=targets), *subs[i + 1 :]]
                if targets and breaks(fewer):
                    subs = fewer
                    changed = True
                    break
    return subs


def report(seed: int, setup: Setup, subs: list[Submit]) -> str:
    """The failing seed's minimal workload and its trace, for the test's message."""
    small = shrink(setup, subs)
    sim, error = simulate(setup, small)
    lines = [f"seed {seed}: {error}", f"setup: {setup}", "workload:"]
    lines += [f"  {s}" for s in small]
    lines += ["trace (last 60 events):", *sim.trace[-60:]]
    return "\n".join(lines)
