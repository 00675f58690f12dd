"""A clock the test sets by hand, for code that takes `now` (or a `clock`) injected."""

from __future__ import annotations


class Clock:
    """Returns `now` until the test moves it."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now
