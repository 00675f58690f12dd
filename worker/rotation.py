"""The worker's turn order (docs/WORKER.md §Rotation and drain), as plain data.

Live jobs enter in submit order; a job a task has just taken goes to the back, so two live jobs
with one task alternate `a1 b1 a2 b2 …`, and a job that had nothing ready (or was skipped for
lack of room) keeps its place. A job that has not had a turn yet goes before every job that
has: a job submitted while another's target is in flight takes the next turn, not one after
that job's next target (docs/WORKER.md §The scheduler). The rotation also knows which jobs a
task of this worker is fetching (held: a job is serial) and which wait for a busy target's
retry time, which spares a claim transaction per waiting job per scan and tells an idle task
how long to wait.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

Rank = Callable[[str], float]  # a job's place before the turn order: lower goes first


class Rotation:
    def __init__(self) -> None:
        self._order: list[str] = []
        self._held: set[str] = set()
        self._waiting: dict[str, float] = {}  # job -> when its busy target may be retried
        self._had_turn: set[str] = set()

    def replace(self, live: Iterable[str]) -> bool:
        """Adopt the store's live jobs (submit order): keep the turn order, put new jobs after
        the jobs that have not had a turn yet and before those that have, forget the jobs that
        ended. Returns whether a job was added."""
        live = list(live)
        alive = set(live)
        kept = [j for j in self._order if j in alive]
        self._had_turn &= alive
        known = set(kept)
        added = [j for j in live if j not in known]
        waiting = [j for j in kept if j not in self._had_turn]
        served = [j for j in kept if j in self._had_turn]
        self._order = waiting + added + served
        self._waiting = {j: t for j, t in self._waiting.items() if j in alive}
        return bool(added)

    def candidates(self, rank: Rank | None = None) -> list[str]:
        """Jobs in the order a task should try them (a copy, safe across awaits): by `rank`
        when given (the callers' recent use, worker/fairness.py), equal ranks in turn order."""
        return sorted(self._order, key=rank) if rank else list(self._order)

    def ready(self, now: float, *, mine: str | None = None) -> list[str]:
        """The candidates worth a claim at `now`: held by no task of ours (`mine` is the
        asking task's own job) and with no retry time still to come."""
        return [j for j in self._order if self.is_ready(j, now, mine=mine)]

    def is_ready(self, job_id: str, now: float, *, mine: str | None = None) -> bool:
        held = job_id in self._held and job_id != mine
        return not held and self._waiting.get(job_id, -math.inf) <= now

    def taken(self, job_id: str) -> None:
        """`job_id` just gave a task a target: its next turn comes after every other job."""
        try:
            self._order.remove(job_id)
        except ValueError:
            return
        self._order.append(job_id)
        self._had_turn.add(job_id)

    def hold(self, job_id: str) -> None:
        """A task of ours is claiming or fetching this job's target."""
        self._held.add(job_id)

    def release(self, job_id: str) -> None:
        self._held.discard(job_id)

    def claimed(self, job_id: str) -> None:
        """A claim succeeded: the job is held, no longer waiting, and goes to the back."""
        self._held.add(job_id)
        self._waiting.pop(job_id, None)
        self.taken(job_id)

    def wait(self, job_id: str, until: float) -> None:
        """The job's busy target may be retried at `until`; until then it is not ready."""
        self._waiting[job_id] = until

    def next_retry(self, after: float) -> float | None:
        """The earliest retry time later than `after` (one already due was tried then)."""
        later = [t for t in self._waiting.values() if t > after]
        return min(later) if later else None
