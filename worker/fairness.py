"""Who has had the drain lately (docs/WORKER.md §Fair shares between callers).

The rotation alone is fair in turns, not in time: a caller whose targets are PDF bombs or a
10 s grep holds a drain task for seconds per turn, while another's page takes 30 ms, so a job
alternating with such a caller's drains at a tenth of its pace. The drain therefore orders the
rotation by each caller's recent use of the worker: the seconds its targets took (each at
least `QUANTUM`), decayed with a half-life, so a caller that has just arrived (or has been
quiet) goes before one that has kept the worker busy.

Callers within `BAND` seconds of the least use among the live jobs' callers count as equal and
keep the rotation's turn order, `a1 b1 a2 b2 …`: ordinary callers are not reordered by the
noise in their timings, only a caller that has used clearly more waits. The table holds
callers seen within the last few half-lives only (a caller whose use has decayed below
`FORGET_BELOW` is dropped), so its size is bounded by the callers active lately.
"""

from __future__ import annotations

from collections.abc import Iterable

HALF_LIFE = 60.0  # seconds
QUANTUM = 0.1  # seconds: what a target costs at least
BAND = 2.0  # seconds of use within which callers count as equal
FORGET_BELOW = 0.001  # seconds of decayed use

Who = tuple[str, str]  # (owner, class): a caller's identity as its jobs record it


class Usage:
    def __init__(self, half_life: float = HALF_LIFE, quantum: float = QUANTUM, band: float = BAND):
        self.half_life = half_life
        self.quantum = quantum
        self.band = band
        self._use: dict[Who, tuple[float, float]] = {}  # who -> (use, as of)

    def of(self, who: Who | None, now: float) -> float:
        """`who`'s decayed use at `now`; none for a caller not known yet."""
        if who is None or who not in self._use:
            return 0.0
        use, at = self._use[who]
        return use * 0.5 ** (max(0.0, now - at) / self.half_life)

    def charge(self, who: Who, seconds: float, now: float) -> None:
        self._use[who] = (self.of(who, now) + max(seconds, self.quantum), now)

    def ranks(self, callers: Iterable[Who | None], now: float) -> dict[Who | None, float]:
        """Each caller's place, lower first: 0 within `band` of the least use among them (the
        turn order decides), else its use."""
        use = {who: self.of(who, now) for who in set(callers)}
        least = min(use.values(), default=0.0)
        return {who: 0.0 if u - least <= self.band else u for who, u in use.items()}

    def prune(self, now: float) -> None:
        self._use = {w: v for w, v in self._use.items() if self.of(w, now) >= FORGET_BELOW}

    def __len__(self) -> int:
        return len(self._use)
