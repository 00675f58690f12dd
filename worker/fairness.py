"""Each caller's virtual time (docs/WORKER.md §Fair shares between callers).

Start-time fair queuing in seconds of the drain: a target starting for caller c gets the start
tag S = max(floor, vt[c]) and charges one `QUANTUM` at once (so a sibling task's next pick
already counts it); when it is stored it charges the rest of its cost, rounded up to whole
quanta. The floor, the system's virtual time, is the latest start tag (it never goes back): a
caller that has been away comes back at the floor, with no credit banked, and a caller ahead
of it (it used more recently) waits until the others have caught up: its lead decays.

Rounding to quanta is what makes ordinary callers alternate exactly: every target shorter than
a quantum costs one, so callers with equal history tie, and ties go to the caller whose last
stored target is oldest (`a1 b1 a2 b2 …`). Only whole quanta of difference reorder callers.
Half a second keeps a 100 ms page on a loaded machine (a few hundred ms from claim to store)
inside one quantum, so the noise of timings does not reorder callers.
"""

from __future__ import annotations

import math

QUANTUM = 0.5  # seconds: what a target costs at least, and the unit of cost

Who = tuple[str, str]  # (owner, class): a caller's identity as its jobs record it


def charge(seconds: float) -> float:
    """A target's cost in virtual seconds: whole quanta, at least one."""
    return max(1, math.ceil(round(seconds / QUANTUM, 9))) * QUANTUM


class Ledger:
    def __init__(self) -> None:
        self._vt: dict[Who, float] = {}
        self.floor = 0.0

    def vtime(self) -> dict[Who, float]:
        """The callers ahead of the floor (the others count as at the floor)."""
        return dict(self._vt)

    def start(self, who: Who) -> None:
        """A target of `who` starts: its start tag, and one quantum charged now."""
        tag = max(self.floor, self._vt.get(who, self.floor))
        self.floor = tag
        self._vt[who] = tag + QUANTUM
        self._vt = {w: t for w, t in self._vt.items() if t > self.floor}

    def finish(self, who: Who, seconds: float) -> None:
        """A target of `who` is stored after `seconds`: the rest of its cost."""
        extra = charge(seconds) - QUANTUM
        if extra:
            self._vt[who] = max(self._vt.get(who, self.floor), self.floor) + extra

    def refund(self, who: Who) -> None:
        """A target of `who` was only put back (busy, a host wait): it costs nothing."""
        if who in self._vt:
            self._vt[who] = max(self.floor, self._vt[who] - QUANTUM)

    def ahead(self, who: Who) -> float:
        """How far `who` is ahead of the floor: the others' use it waits for."""
        return max(0.0, self._vt.get(who, self.floor) - self.floor)

    def __len__(self) -> int:
        return len(self._vt)
