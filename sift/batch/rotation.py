"""The worker's rotation of live jobs (SPEC §4.3 rule 2), as plain data.

Jobs enter in submit order; a job a task has just taken goes to the back, so two live jobs
with one task alternate `a1 b1 a2 b2 …`, and a job that had nothing ready (or was skipped) keeps
its place. A job that has not had a turn yet goes before every job that has: a job submitted
while another's target is in flight takes the next turn, not one after that job's next target
(docs/WORKER.md §The scheduler).
"""

from __future__ import annotations

from collections.abc import Iterable


class Rotation:
    def __init__(self) -> None:
        self._order: list[str] = []
        self._had_turn: set[str] = set()

    def replace(self, live: Iterable[str]) -> bool:
        """Adopt the store's live jobs (submit order): keep the turn order, and put new jobs
        after the jobs that have not had a turn yet and before those that have.

        Returns whether a job was added.
        """
        live = list(live)
        alive = set(live)
        kept = [j for j in self._order if j in alive]
        self._had_turn &= alive
        known = set(kept)
        added = [j for j in live if j not in known]
        waiting = [j for j in kept if j not in self._had_turn]
        served = [j for j in kept if j in self._had_turn]
        self._order = waiting + added + served
        return bool(added)

    def candidates(self) -> list[str]:
        """Jobs in the order a task should try them (a copy, safe across awaits)."""
        return list(self._order)

    def taken(self, job_id: str) -> None:
        """`job_id` just gave a task a target: its next turn comes after every other job."""
        try:
            self._order.remove(job_id)
        except ValueError:
            return
        self._order.append(job_id)
        self._had_turn.add(job_id)

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self):
        return iter(list(self._order))
