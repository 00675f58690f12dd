"""The worker's rotation of live jobs (docs/WORKER.md §Rotation and drain), as plain data.

Jobs enter in submit order; a job a task has just taken goes to the back, so two live jobs
with one task alternate `a1 b1 a2 b2 …`, and a job that had nothing ready keeps its place at
the front until it has.
"""

from __future__ import annotations

from collections.abc import Iterable


class Rotation:
    def __init__(self) -> None:
        self._order: list[str] = []

    def replace(self, live: Iterable[str]) -> bool:
        """Adopt the store's live jobs (submit order): keep the turn order, append new ones.

        Returns whether a job was added.
        """
        live = list(live)
        alive = set(live)
        kept = [j for j in self._order if j in alive]
        known = set(kept)
        added = [j for j in live if j not in known]
        self._order = kept + added
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
