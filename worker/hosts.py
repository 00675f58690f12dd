"""What the drain knows about the hosts of its jobs' next targets (docs/WORKER.md §The
scheduler).

A task never stalls on a full gate or a host's spacing wait: it skips the job and serves the
next one in rotation whose next target has room. To skip without claiming again, the drain
remembers, for a job whose next target met a full gate or a wait, that target's caller and
host, until the target is taken. It also remembers each host's "not before" time (Crawl-delay
spacing, an upstream's Retry-After) as the pipeline reported it; the shared, authoritative
copy is in the store (`Politeness`), which the pipeline consults before every batch fetch.
"""

from __future__ import annotations

import math

from yarl import URL

from sift.gates import Gates, host_key


def host_of(url: str) -> str:
    return host_key(URL(url).host or "")


class HostRoom:
    def __init__(self, gates: Gates | None):
        self.gates = gates
        self._next: dict[str, tuple[str, str]] = {}  # job -> (caller, host) of its next target
        self._not_before: dict[str, float] = {}  # host -> no batch fetch before this time

    def has_room(self, caller: str, host: str, now: float) -> bool:
        """A batch fetch by `caller` to `host` could start now."""
        if self._not_before.get(host, -math.inf) > now:
            return False
        return self.gates is None or self.gates.room(caller, host, background=True)

    def blocked(self, job_id: str, now: float) -> bool:
        """The job's next target is known to have no room now."""
        known = self._next.get(job_id)
        return known is not None and not self.has_room(*known, now)

    def remember(self, job_id: str, caller: str, host: str) -> None:
        self._next[job_id] = (caller, host)

    def forget(self, job_id: str) -> None:
        """The job's next target was taken: what comes after it is not known."""
        self._next.pop(job_id, None)

    def wait(self, host: str, until: float) -> None:
        self._not_before[host] = max(until, self._not_before.get(host, -math.inf))

    @property
    def any_gated(self) -> bool:
        return bool(self._next)

    def retain(self, live: set[str], now: float) -> None:
        """Forget finished jobs and past waits (bounded by the live jobs and their hosts)."""
        self._next = {j: v for j, v in self._next.items() if j in live}
        self._not_before = {h: t for h, t in self._not_before.items() if t > now}

    def next_wait_end(self, after: float) -> float | None:
        """The earliest host wait that ends after `after`, when a job waits for one."""
        hosts = {host for _, host in self._next.values()}
        ends = [t for h, t in self._not_before.items() if h in hosts and t > after]
        return min(ends, default=None)
