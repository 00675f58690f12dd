"""The per-key request rate (docs/GATES.md §Request rate per key): a token bucket per caller,
kept in the API process's memory and asked before any database or fetch work.

A bucket holds up to `burst` tokens and gains `rate` a second; a request takes one. With none
left the request is refused, and the time until the next token is the Retry-After. Time is
passed in (`now`): the app's clock, so tests drive it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

# Buckets kept before full ones (equal to a caller never seen) are forgotten.
PRUNE_AT = 4096


class RequestRate:
    def __init__(self, rate: float, burst: int):
        """`rate`: tokens a second (0: no limit); `burst`: the most a bucket holds."""
        self.rate = rate
        self.burst = burst
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: Hashable, now: float) -> float | None:
        """Take a token for `key`'s request: None when it may go, else the seconds until its
        bucket has one again."""
        if self.rate <= 0:
            return None
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.rate)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate
        if len(self._buckets) >= PRUNE_AT and key not in self._buckets:
            self._prune(now)
        self._buckets[key] = (tokens - 1.0, now)
        return None

    def _prune(self, now: float) -> None:
        self._buckets = {
            k: (t, at)
            for k, (t, at) in self._buckets.items()
            if t + (now - at) * self.rate < self.burst
        }

    def __len__(self) -> int:
        return len(self._buckets)


def retry_in(seconds: float) -> int:
    """The Retry-After header's whole seconds: at least 1, never before the token is there."""
    return max(1, math.ceil(seconds))
