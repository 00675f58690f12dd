"""What the drain knows about the hosts of its jobs' next targets (docs/WORKER.md §The
scheduler).

A task never stalls on a full gate or a host's wait: the scheduler skips the job and serves the
next one with room. To skip without claiming again, the drain remembers, for a job whose next
target met a full gate or a wait, that target's caller and host, until the target is taken. It
also remembers each host's "not before" time (Crawl-delay spacing, an upstream's Retry-After)
with its reason, as the pipeline reported it; the shared, authoritative copy is in the store
(`Politeness`), which the pipeline consults before every batch fetch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from yarl import URL

from sift.errors import GatesFull
from sift.gates import Gates, Permit, host_key
from worker.scheduler import Skip


def host_of(url: str) -> str:
    return host_key(URL(url).host or "")


class HostRoom:
    def __init__(self, gates: Gates | None):
        self.gates = gates
        self._next: dict[str, tuple[str, str]] = {}  # job -> (caller, host) of its next target
        self._last: dict[str, tuple[str, str]] = {}  # job -> (caller, host) of its last one taken
        self._waits: dict[str, tuple[float, Skip]] = {}  # host -> (not before, why)
        # Told whether any job waits for a gate slot, after every change (the worker's nudge
        # listener: the API's "slot freed" datagram is sent only while one waits).
        self.on_waiting: Callable[[bool], None] | None = None

    def take(self, caller: str, host: str, now: float) -> tuple[Skip | None, Permit | None]:
        """Why a batch fetch by `caller` to `host` could not start now, or None and the gate
        slots it starts with (taken here, once, and handed to the fetch; None without gates)."""
        until, why = self._waits.get(host, (-math.inf, Skip.RETRY_AFTER))
        if until > now:
            return why, None
        if self.gates is None:
            return None, None
        try:
            return None, self.gates.acquire(caller, host, background=True)
        except GatesFull:  # unreachable gates count as full (docs/GATES.md §Across boxes)
            return Skip.HOST_BUSY, None

    def next_host(self, job_id: str) -> str | None:
        known = self._next.get(job_id)
        return known[1] if known else None

    def no_room(self) -> frozenset[tuple[str, str]]:
        """The remembered (caller, host) pairs the gates would refuse now (a probe each: a
        take and give back, nothing held)."""
        if self.gates is None:
            return frozenset()
        pairs = set(self._next.values())
        return frozenset(p for p in pairs if not self.gates.room(*p, background=True))

    def waits(self) -> dict[str, tuple[float, Skip]]:
        return dict(self._waits)

    def remember(self, job_id: str, caller: str, host: str) -> None:
        self._next[job_id] = (caller, host)
        self._tell()

    def forget(self, job_id: str) -> None:
        """The job's next target was taken: what comes after it is not known."""
        if self._next.pop(job_id, None) is not None:
            self._tell()

    def took(self, job_id: str, caller: str, host: str) -> None:
        """The job's next target was taken (`forget`), on `host`."""
        self.forget(job_id)
        self._last[job_id] = (caller, host)

    def likely_busy(self, job_id: str, now: float) -> bool:
        """The host of the job's last target taken waits or has no room now, and its next
        target's host is not known: a job's targets mostly share a host. A guess, for the slow
        lane's move at once alone (worker.state.DrainState.must_yield); the scheduler never
        skips a job on it."""
        if job_id in self._next or job_id not in self._last:
            return False
        caller, host = self._last[job_id]
        if self._waits.get(host, (-math.inf, Skip.RETRY_AFTER))[0] > now:
            return True
        return self.gates is not None and not self.gates.room(caller, host, background=True)

    def forget_all(self) -> None:
        self._next.clear()
        self._tell()

    def _tell(self) -> None:
        if self.on_waiting is not None:
            self.on_waiting(bool(self._next))

    def wait(self, host: str, until: float, why: Skip) -> None:
        if until > self._waits.get(host, (-math.inf, why))[0]:
            self._waits[host] = (until, why)

    @property
    def any_gated(self) -> bool:
        return bool(self._next)

    def retain(self, live: set[str], now: float) -> None:
        """Forget finished jobs and past waits (bounded by the live jobs and their hosts)."""
        self._next = {j: v for j, v in self._next.items() if j in live}
        self._last = {j: v for j, v in self._last.items() if j in live}
        self._tell()
        self._waits = {h: w for h, w in self._waits.items() if w[0] > now}
