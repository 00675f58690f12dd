"""A discrete-event simulation of the drain (docs/WORKER.md §The scheduler's guarantees).

Virtual clock, seeded workloads: callers, jobs, target lengths from 1 ms to 30 s, bombs that
fail at the render limit, hosts with few slots, Crawl-delay, 429 with Retry-After, a busy
database, cancels, hand-offs, 1–2 drain tasks per worker and several workers sharing one store
with the PostgreSQL engine's claim rules (a job is claimed only when live, with nothing in
flight on any worker and its lowest pending target due) and its shared gates and host waits.

Each worker keeps the drain's own state (`worker.state.DrainState`) and asks the drain's own
function (`worker.scheduler.decide`); the loop around them (claim, admit, fetch, hand off,
settle, chained claim, idle and wake) is the drain's, written as events. `tests/simcheck.py`
checks every guarantee after every event.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field

from sift.errors import GatesFull
from worker.scheduler import Skip, decide
from worker.state import DrainState

HAND_OFF_AFTER = 0.25
POLL = 0.5
RETRY_WAIT = 0.2
RENDER_LIMIT = 10.0
PUT_BACK = 0.001  # seconds a fetch takes to meet a wait or a busy database


@dataclass(frozen=True)
class Spec:
    length: float
    host: str
    kind: str = "ok"  # ok | bomb | r429 | busy


@dataclass(frozen=True)
class Submit:
    at: float
    who: str
    targets: tuple[Spec, ...]
    cancel_at: float | None = None


@dataclass(frozen=True)
class Setup:
    workers: int = 1
    drain_tasks: int = 1
    slow_targets: int = 2
    per_host: dict[str, int] = field(default_factory=dict)  # host -> slots (default 2)
    per_caller: int = 4
    global_: int = 8
    crawl_delay: dict[str, float] = field(default_factory=dict)
    retry_after: float = 3.0


@dataclass
class SimJob:
    id: str
    who: str
    specs: tuple[Spec, ...]
    status: list[str]
    retry_at: list[float]
    tries: list[int]
    cancelled: bool = False

    def live(self) -> bool:
        return not self.cancelled and any(s in ("pending", "running") for s in self.status)

    def next_idx(self) -> int | None:
        return next((i for i, s in enumerate(self.status) if s == "pending"), None)


class Store:
    """The store's rules for claims and outcomes, shared by every worker."""

    def __init__(self) -> None:
        self.jobs: dict[str, SimJob] = {}

    def live_owners(self) -> list[tuple[str, str, str]]:
        return [(j.id, j.who, "user") for j in self.jobs.values() if j.live()]

    def claimable(self, job_id: str, now: float) -> int | None:
        job = self.jobs.get(job_id)
        if job is None or not job.live() or "running" in job.status:
            return None
        idx = job.next_idx()
        if idx is None or job.retry_at[idx] > now:
            return None
        return idx


class Gates:
    """The gates' rule (docs/GATES.md): a batch fetch never takes a host's or the global
    limit's last free slot; counts shared by every worker, as on PostgreSQL."""

    def __init__(self, setup: Setup):
        self.setup = setup
        self.host: dict[str, int] = {}
        self.caller: dict[str, int] = {}
        self.total = 0

    def limit(self, host: str) -> int:
        return self.setup.per_host.get(host, 2)

    def room(self, caller: str, host: str, *, background: bool = True) -> bool:
        p, g = self.limit(host), self.setup.global_
        return (
            self.caller.get(caller, 0) < self.setup.per_caller
            and self.host.get(host, 0) < p - (1 if p > 1 else 0)
            and self.total < g - (1 if g > 1 else 0)
        )

    def acquire(self, caller: str, host: str, *, background: bool = True) -> None:
        """The drain's admission (`HostRoom.take`): refused as the real gates refuse; the
        slots are counted by the fetch, which starts at the same instant."""
        if not self.room(caller, host, background=background):
            raise GatesFull("sim: no room")

    def take(self, caller: str, host: str) -> None:
        self.caller[caller] = self.caller.get(caller, 0) + 1
        self.host[host] = self.host.get(host, 0) + 1
        self.total += 1

    def give(self, caller: str, host: str) -> None:
        self.caller[caller] -= 1
        self.host[host] -= 1
        self.total -= 1


@dataclass
class Fetch:
    worker: int
    key: tuple[str, int]
    who: str
    host: str
    started: float
    ends: float
    outcome: str  # done | failed | hostwait | busy | gatesfull
    until: float = 0.0  # hostwait / retry-after time
    task: int | None = None  # the drain task holding it; None once handed off
    gated: bool = False


class Worker:
    def __init__(self, n: int, setup: Setup, gates: Gates):
        self.n = n
        self.state = DrainState(gates, shared=setup.workers > 1)
        self.tasks: list[Fetch | None] = [None] * setup.drain_tasks
        self.asleep_until: list[float] = [-math.inf] * setup.drain_tasks
        self.handed: dict[tuple[str, int], Fetch] = {}
        self.refreshed_at = -math.inf

    def awake(self, i: int, now: float) -> bool:
        return self.tasks[i] is None and self.asleep_until[i] <= now

    def wake(self) -> None:
        self.asleep_until = [-math.inf] * len(self.tasks)


class Sim:
    def __init__(self, setup: Setup, workload: list[Submit], check=None):
        self.setup = setup
        self.store = Store()
        self.gates = Gates(setup)
        self.workers = [Worker(i, setup, self.gates) for i in range(setup.workers)]
        self.not_before: dict[str, float] = {}  # the shared host_pace table
        self.now = 0.0
        self.events: list[tuple[float, int, str, object]] = []
        self._seq = 0
        self.trace: list[str] = []
        self.check = check
        self.submits = len(workload)
        for n, sub in enumerate(workload):
            self.at(sub.at, "submit", (f"j{n}", sub))
            if sub.cancel_at is not None:
                self.at(sub.cancel_at, "cancel", f"j{n}")

    def at(self, when: float, kind: str, data: object) -> None:
        self._seq += 1
        heapq.heappush(self.events, (when, self._seq, kind, data))

    def log(self, line: str) -> None:
        self.trace.append(f"{self.now:9.3f} {line}")

    def run(self, until: float = 3600.0) -> None:
        while self.events:
            when, _, kind, data = heapq.heappop(self.events)
            if when > until or (self.submits == 0 and not self.busy()):
                break
            if kind == "submit":
                self.submits -= 1
            self.now = when
            getattr(self, f"on_{kind}")(data)
            self.pump()
            if self.check is not None:
                self.check.after_event(self)

    def busy(self) -> bool:
        """Work left: a live job, or a fetch still to end."""
        if any(j.live() for j in self.store.jobs.values()):
            return True
        return any(any(w.tasks) or w.handed for w in self.workers)

    # -- events -------------------------------------------------------------------------------

    def on_submit(self, data) -> None:
        job_id, sub = data
        n = len(sub.targets)
        self.store.jobs[job_id] = SimJob(
            job_id, sub.who, sub.targets, ["pending"] * n, [-math.inf] * n, [0] * n
        )
        self.log(f"submit {job_id} by {sub.who}: {len(sub.targets)} targets")
        self.nudge_all()

    def on_cancel(self, job_id) -> None:
        job = self.store.jobs[job_id]
        if job.live():
            job.cancelled = True
            self.log(f"cancel {job_id}")
            self.nudge_all()

    def on_wake(self, data) -> None:
        w, i = data
        if self.workers[w].tasks[i] is None and self.workers[w].asleep_until[i] <= self.now:
            self.workers[w].asleep_until[i] = -math.inf

    def on_hand_off(self, fetch: Fetch) -> None:
        """The target has run `hand_off_after`: to the lane if it has a place."""
        w = self.workers[fetch.worker]
        if fetch.task is None or w.tasks[fetch.task] is not fetch:
            return  # ended, or in the lane already
        self.refresh(w)  # the drain's `_to_lane` judges live jobs at most POLL old
        if w.state.lane_has_room((fetch.who, "user"), self.now, self.setup.slow_targets):
            self.hand_off(w, fetch, "")
        else:
            self.at(self.now + HAND_OFF_AFTER, "hand_off", fetch)

    def hand_off(self, w: Worker, fetch: Fetch, why: str) -> None:
        if self.check is not None:
            self.check.on_hand_off(self, w, fetch)
        w.tasks[fetch.task] = None
        fetch.task = None
        w.handed[fetch.key] = fetch
        w.state.handed_off(fetch.key)
        self.log(f"w{w.n} hands off {fetch.key}{why}")

    def yield_tasks(self, w: Worker) -> bool:
        """The drain's waiting tasks, woken by any change that can make a job ready: a target
        whose task another caller's ready job waits for moves to the lane at once."""
        moved = False
        for fetch in w.tasks:
            if fetch is None:
                continue
            self.refresh(w)
            who, lanes = (fetch.who, "user"), self.setup.slow_targets
            if w.state.must_yield(who, self.now, lanes, len(w.tasks)):
                self.hand_off(w, fetch, " at once")
                moved = True
        return moved

    def on_end(self, fetch: Fetch) -> None:
        w = self.workers[fetch.worker]
        if fetch.gated:
            self.gates.give(fetch.who, fetch.host)
        task = fetch.task
        if task is None:
            del w.handed[fetch.key]
        else:
            w.tasks[task] = None
        following = self.settle(w, fetch, chain=task is not None)
        w.wake()  # a slot freed here, a job ready again: this worker's tasks look again
        if following is not None and task is not None and w.tasks[task] is None:
            self.start(w, task, following)

    def nudge_all(self) -> None:
        for w in self.workers:
            w.refreshed_at = -math.inf
            w.wake()

    # -- the drain loop -----------------------------------------------------------------------

    def pump(self) -> None:
        """Every awake idle task scans, as the drain's `_take` does, until it sleeps; a target
        that must yield its task does, and the freed task scans again."""
        moved = True
        while moved:
            moved = False
            for w in self.workers:
                for i in range(len(w.tasks)):
                    while w.awake(i, self.now):
                        self.refresh(w)
                        if not self.take(w, i):
                            break
                moved = self.yield_tasks(w) or moved

    def refresh(self, w: Worker) -> None:
        if self.now >= w.refreshed_at + POLL:
            w.refreshed_at = self.now
            if w.state.adopt(self.store.live_owners(), self.now):
                w.wake()

    def take(self, w: Worker, i: int) -> bool:
        tried: set[str] = set()
        while True:
            decision = decide(w.state.snapshot(self.now, tried))
            job_id = decision.job_id
            if job_id is None:
                # One worker hears of every change at once; several also poll each other's.
                poll = self.now + POLL if len(self.workers) > 1 else math.inf
                wake = min(poll, decision.wake_at or math.inf)
                if wake == math.inf:
                    w.asleep_until[i] = math.inf
                    return False
                w.asleep_until[i] = max(wake, self.now + 1e-9)
                self.at(w.asleep_until[i], "wake", (w.n, i))
                return False
            tried.add(job_id)
            idx = self.store.claimable(job_id, self.now)
            if idx is None:
                continue
            if self.start(w, i, (job_id, idx)):
                return True

    def start(self, w: Worker, i: int, key: tuple[str, int]) -> bool:
        """The claim and `_admit`: a target whose host has no room goes back as it was."""
        job = self.store.jobs[key[0]]
        spec = job.specs[key[1]]
        if self.check is not None:
            self.check.on_claim(self, w, key)
        refusal, _ = w.state.room.take(job.who, spec.host, self.now)
        if refusal is not None:
            w.state.room.remember(key[0], job.who, spec.host)
            return False
        job.status[key[1]] = "running"
        w.state.started(key, (job.who, "user"), self.now, spec.host)
        fetch = self.fetch(w, key, job, spec)
        fetch.task = i
        w.tasks[i] = fetch
        if self.check is not None:
            self.check.on_start(self, w, fetch)
        self.at(fetch.ends, "end", fetch)
        if fetch.ends - self.now > HAND_OFF_AFTER:
            self.at(self.now + HAND_OFF_AFTER, "hand_off", fetch)
        self.log(f"w{w.n}.t{i} starts {key} of {job.who} on {spec.host} ({fetch.outcome})")
        return True

    def fetch(self, w: Worker, key, job: SimJob, spec: Spec) -> Fetch:
        """The pipeline: gates, the host's spacing, then the site."""
        now, s = self.now, self.setup
        job.tries[key[1]] += 1
        if not self.gates.room(job.who, spec.host):
            return Fetch(w.n, key, job.who, spec.host, now, now + PUT_BACK, "gatesfull")
        if spec.kind == "busy" and job.tries[key[1]] <= 2:
            return Fetch(w.n, key, job.who, spec.host, now, now + PUT_BACK, "busy")
        until = self.not_before.get(spec.host, -math.inf)
        if until > now:
            return Fetch(w.n, key, job.who, spec.host, now, now + PUT_BACK, "hostwait", until)
        self.gates.take(job.who, spec.host)
        delay = s.crawl_delay.get(spec.host, 0.0)
        self.not_before[spec.host] = max(until, now + delay)
        if self.check is not None:
            self.check.on_network(self, spec.host, job.who)
        if spec.kind == "bomb":
            f = Fetch(w.n, key, job.who, spec.host, now, now + RENDER_LIMIT, "failed")
        elif spec.kind == "r429":
            f = Fetch(w.n, key, job.who, spec.host, now, now + spec.length, "failed")
            f.until = now + spec.length + s.retry_after
        else:
            f = Fetch(w.n, key, job.who, spec.host, now, now + spec.length, "done")
        f.gated = True
        return f

    def settle(self, w: Worker, f: Fetch, *, chain: bool):
        """`worker/settle.py`: put back, or store and claim the next in the scheduler's order."""
        job, who = self.store.jobs[f.key[0]], (f.who, "user")
        if f.outcome in ("hostwait", "gatesfull", "busy"):
            retry = self.now + RETRY_WAIT if f.outcome == "busy" else None
            if f.outcome == "hostwait":
                w.state.room.wait(f.host, f.until, Skip.CRAWL_DELAY)
            if f.outcome != "busy":
                w.state.room.remember(f.key[0], f.who, f.host)
            w.state.put_back(f.key, who, retry)
            job.status[f.key[1]] = "pending"
            job.retry_at[f.key[1]] = retry if retry is not None else self.now
            w.state.done(f.key)
            if self.check is not None:
                self.check.on_put_back(self, w, f)
            self.log(f"w{w.n} puts back {f.key} ({f.outcome})")
            return None
        if f.outcome == "failed" and f.until:
            self.not_before[f.host] = max(self.not_before.get(f.host, -math.inf), f.until)
            w.state.room.wait(f.host, f.until, Skip.RETRY_AFTER)
        w.state.stored(f.key, who, self.now - f.started)
        order: tuple[str, ...] = ()
        if chain:
            self.refresh(w)  # a job submitted meanwhile takes its turn
            order = decide(w.state.snapshot(self.now, mine=f.key[0])).order
        job.status[f.key[1]] = f.outcome
        w.state.done(f.key)
        if self.check is not None:
            self.check.on_stored(self, w, f)
        self.log(f"w{w.n} stores {f.key} {f.outcome}")
        for job_id in order:
            idx = self.store.claimable(job_id, self.now)
            if idx is not None:
                return (job_id, idx)
        return None


def workload(rng: random.Random) -> tuple[Setup, list[Submit]]:
    """A seeded random workload and setup."""
    hosts = [f"h{i}" for i in range(rng.randint(1, 4))]
    setup = Setup(
        workers=rng.choice((1, 1, 1, 2, 3)),
        drain_tasks=rng.choice((1, 2)),
        slow_targets=rng.choice((1, 2, 2)),
        per_host={h: rng.choice((1, 2, 2, 3, 8)) for h in hosts},
        per_caller=rng.choice((2, 4)),
        global_=rng.choice((3, 8)),
        crawl_delay={h: rng.choice((0.5, 2.0)) for h in hosts if rng.random() < 0.3},
        retry_after=rng.choice((1.0, 5.0)),
    )
    callers = [f"c{i}" for i in range(rng.randint(1, 4))]
    subs = []
    for _ in range(rng.randint(1, 6)):
        specs = []
        for _ in range(rng.randint(1, 6)):
            length = math.exp(rng.uniform(math.log(0.001), math.log(30.0)))
            kind = rng.choices(("ok", "bomb", "r429", "busy"), (85, 5, 5, 5))[0]
            specs.append(Spec(round(length, 4), rng.choice(hosts), kind))
        at = round(rng.uniform(0, 20), 3) if rng.random() < 0.6 else 0.0
        cancel = round(at + rng.uniform(0, 30), 3) if rng.random() < 0.1 else None
        subs.append(Submit(at, rng.choice(callers), tuple(specs), cancel))
    return setup, subs


def attack(rng: random.Random) -> tuple[Setup, list[Submit]]:
    """docs/BENCHMARKS.md §Hostile load's shape: a good caller's job of short pages while one
    to three attackers each submit several jobs of bombs (each runs to the render limit), on
    hosts of their own, some bombs between short targets."""
    setup = Setup(
        drain_tasks=rng.choice((1, 2)),
        slow_targets=rng.choice((1, 2, 2)),
        per_host={"good": 2},
        per_caller=rng.choice((2, 4)),
        global_=rng.choice((8, 16)),
    )
    good = Submit(
        round(rng.uniform(0, 2), 3),
        "good",
        tuple(Spec(round(rng.uniform(0.02, 0.3), 4), "good") for _ in range(32)),
    )
    subs = [good]
    for a in range(rng.randint(1, 3)):
        for j in range(rng.randint(2, 4)):
            host = f"a{a}h{j}"
            specs = [
                Spec(RENDER_LIMIT, host, "bomb") if rng.random() < 0.7 else Spec(0.05, host)
                for _ in range(rng.randint(1, 3))
            ]
            subs.append(Submit(round(rng.uniform(0, 2), 3), f"a{a}", tuple(specs)))
    return setup, subs
