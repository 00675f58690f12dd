"""One memory budget for a process's render pool as a whole (docs/SECURITY.md §The render
pool's memory budget).

Each render child has an address-space limit, but a limit per child does not bound their
total: six children each allowed hundreds of MiB, plus the fork server and jq children, filled
well past what the host gives the service. So the pool keeps one budget, `[render]
pool_memory`, for the proportional set size (PSS: a page shared by n processes counts 1/n in
each, so the sum over a tree is the memory the tree really holds) of the fork server, every
render child and every jq child together. While steps run it samples them every
`SAMPLE_EVERY` seconds and, past the budget, recycles idle children that hold more than their
share, then kills the busy process using the most (`victims` gives the order): when the total
is over, the largest is over its fair share (the budget split between the busy ones), so a
bomb's step fails and a small render beside it goes on.

The rule is a pure function (`victims`) over sizes, so it is tested without processes. The
sampling (`Meter`) reads each process's RSS from `statm` (about 25 µs) and its PSS from
`smaps_rollup` (which walks its page tables: 1–4 ms for a child on a loaded machine) only
every `REFRESH` seconds: in between, a process's PSS is estimated as its last PSS plus what its
RSS grew since (a step's new allocations are its own pages, which count whole in both). Before
anything is killed the PSS of every process is read again, so a kill never rests on an
estimate.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

SAMPLE_EVERY = 0.05  # seconds between samples while a step runs
SAMPLE_NEAR = 0.01  # seconds between samples once the pool holds over NEAR_SHARE of its budget
NEAR_SHARE = 0.75
REFRESH = 1.0  # seconds between full PSS reads; RSS growth fills in between
_PAGE = os.sysconf("SC_PAGE_SIZE")


def interval(total: int, budget: int) -> float:
    """Seconds to the next sample: shorter once the pool is near its budget, where what the
    busy children allocate between two samples is what the total can overshoot it by."""
    return SAMPLE_NEAR if total > NEAR_SHARE * budget else SAMPLE_EVERY


def victims(
    sizes: Mapping[int, int], idle: Iterable[int], fixed: int, budget: int
) -> tuple[list[int], list[int]]:
    """Which idle and which busy processes to kill so the total fits `budget`.

    `sizes`: bytes per process of the pool (render and jq children); `idle`: those not running
    a step; `fixed`: bytes nothing here can free (the fork server). First idle children
    holding more than an equal share of the budget (what a past step left them), largest
    first; then busy ones, largest first, each only while it is above its fair share (the
    budget less the fork server and one warm idle child, split between the busy ones), so a
    process within its share is never killed for another's growth; then the other idle
    children, the warm one last. The warm one (the smallest idle child, if of ordinary size)
    outlives a bomb beside it: killing it would not save the bomb's step, and every light
    step after would pay for a new, cold child.
    """
    sizes = dict(sizes)
    total = fixed + sum(sizes.values())
    if total <= budget:
        return [], []
    idle = set(idle)
    equal = (budget - fixed) / len(sizes)
    warm = min(idle, key=lambda p: sizes[p], default=None)
    if warm is not None and sizes[warm] > equal:
        warm = None
    idle_kill: list[int] = []
    for pid in sorted(idle, key=lambda p: -sizes[p]):
        if total <= budget or sizes[pid] <= equal:
            break
        idle_kill.append(pid)
        total -= sizes[pid]
    busy = sorted((p for p in sizes if p not in idle), key=lambda p: -sizes[p])
    reserved = fixed + (sizes[warm] if warm is not None else 0)
    busy_kill: list[int] = []
    while total > budget and busy:
        pid = busy[0]
        share = (budget - reserved) / len(busy)
        if sizes[pid] <= share:
            break
        busy_kill.append(pid)
        total -= sizes.pop(pid)
        busy.pop(0)
    for pid in sorted(idle - set(idle_kill), key=lambda p: (p == warm, -sizes[p])):
        if total <= budget:
            break
        idle_kill.append(pid)
        total -= sizes[pid]
    return idle_kill, busy_kill


def rss(pid: int) -> int | None:
    """Resident bytes of `pid` (`statm`, cheap); None once it is gone."""
    return _statm(pid, 1)


def mapped(pid: int) -> int | None:
    """Address space of `pid` in bytes (`statm`'s first field); None once it is gone."""
    return _statm(pid, 0)


def _statm(pid: int, field: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[field]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def pss(pid: int) -> int | None:
    """Proportional set size of `pid` in bytes (`smaps_rollup`); None once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def sizes(pids: Iterable[int]) -> dict[int, int]:
    """PSS of each pid still alive."""
    return {p: s for p in pids if (s := pss(p)) is not None}


class Meter:
    """PSS of the pool's processes, read in full every `REFRESH` seconds and estimated from
    RSS growth in between (see the module's docstring)."""

    def __init__(self) -> None:
        self._base: dict[int, tuple[int, int]] = {}  # pid -> (PSS, RSS) when last read in full
        self._at = float("-inf")

    def sizes(self, pids: Iterable[int], now: float) -> dict[int, int]:
        """Each live pid's PSS, estimated unless `REFRESH` has passed since the last full read."""
        if now - self._at >= REFRESH:
            self._at = now
            return self.exact(pids)
        out = {}
        for pid in pids:
            resident = rss(pid)
            base = self._base.get(pid)
            if resident is None:
                continue
            if base is None:
                out.update(self.exact([pid], keep=True))
            else:
                out[pid] = max(base[0] + resident - base[1], 0)
        return out

    def exact(self, pids: Iterable[int], keep: bool = False) -> dict[int, int]:
        """Each live pid's PSS, read now (and kept as the base of later estimates)."""
        out = {}
        for pid in pids:
            resident, size = rss(pid), pss(pid)
            if resident is not None and size is not None:
                out[pid] = size
                self._base[pid] = (size, resident)
        if not keep:
            self._base = {p: self._base[p] for p in out}
        return out
