"""One memory budget for a process's render pool as a whole (docs/SECURITY.md §The render
pool's memory budget).

Each render child has an address-space limit, but a limit per child does not bound their
total: six children each allowed hundreds of MiB, plus the fork server and jq children, filled
well past what the host gives the service. So the pool keeps one budget, `[render]
pool_memory`, for the proportional set size (PSS: a page shared by n processes counts 1/n in
each, so the sum over a tree is the memory the tree really holds) of the fork server, every
render child and every jq child together. While steps run it samples them every
`SAMPLE_EVERY` seconds and, past the budget, recycles idle children (largest first), then kills
the busy process using the most: when the total is over, the largest is over its fair share
(the budget split between the busy ones), so a bomb's step fails and a small render beside
it goes on. A step starts beside others only while `STEP_ROOM` is left under the budget, so
steps that would not fit together queue rather than kill each other.

The rule is a pure function (`victims`) over sizes, so it is tested without processes; the
sampling reads `/proc` (RSS from `statm` first, a few µs: when the RSS total is within budget,
so is the PSS total, since PSS <= RSS; only past it is `smaps_rollup` read for the real PSS).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

SAMPLE_EVERY = 0.05  # seconds between samples while a step runs
STEP_ROOM = 32 * 1024 * 1024  # left under the budget for a step to start beside others
_PAGE = os.sysconf("SC_PAGE_SIZE")


def victims(
    sizes: Mapping[int, int], idle: Iterable[int], fixed: int, budget: int
) -> tuple[list[int], list[int]]:
    """Which idle and which busy processes to kill so the total fits `budget`.

    `sizes`: bytes per process of the pool (render and jq children); `idle`: those not running
    a step; `fixed`: bytes nothing here can free (the fork server). Idle children go first,
    largest first; then busy ones, largest first, each only while it is above its fair share
    of what is left, so a process within its share is never killed for another's growth.
    """
    total = fixed + sum(sizes.values())
    if total <= budget:
        return [], []
    idle = set(idle)
    idle_kill: list[int] = []
    for pid in sorted(idle, key=lambda p: -sizes[p]):
        if total <= budget:
            break
        idle_kill.append(pid)
        total -= sizes[pid]
    busy = sorted((p for p in sizes if p not in idle), key=lambda p: -sizes[p])
    busy_kill: list[int] = []
    while total > budget and busy:
        pid = busy[0]
        share = (budget - fixed) / len(busy)
        if sizes[pid] <= share:
            break
        busy_kill.append(pid)
        total -= sizes.pop(pid)
        busy.pop(0)
    return idle_kill, busy_kill


def rss(pid: int) -> int | None:
    """Resident bytes of `pid` (`statm`, cheap); None once it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def mapped(pid: int) -> int | None:
    """Address space of `pid` in bytes (`statm`'s first field); None once it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[0]) * _PAGE
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


def rss_total(pids: Iterable[int]) -> int:
    """RSS of these pids together: an upper bound of their PSS, for a few µs each."""
    return sum(r for p in pids if (r := rss(p)) is not None)
