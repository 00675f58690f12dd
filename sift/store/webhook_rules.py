"""Webhook delivery rules, the same on both engines (docs/API.md §Webhooks).

Which events a webhook asks for, when a delivery is tried again, what an answer does to it,
and what a job's status shows of its deliveries. Each engine's `webhooks` module keeps the
outbox; the worker's sender (`worker/webhooks.py`) sends and reports each answer here.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from sift.store.event_rules import KINDS, TARGET_KINDS, TERMINAL_KINDS

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"

DEFAULT_EVENTS = tuple(sorted(TERMINAL_KINDS))
PATTERNS = {"job.*": ("job.running", *sorted(TERMINAL_KINDS)), "target.*": sorted(TARGET_KINDS)}
PATTERNS["*"] = (*PATTERNS["job.*"], *PATTERNS["target.*"])

# Waits before tries 2..6: about an hour from the first try to the last.
DELAYS = (10.0, 60.0, 300.0, 900.0, 2400.0)
TRIES = len(DELAYS) + 1
JITTER = 0.2  # each wait is drawn within ±20 %
RETRY_AFTER_MAX = 3600.0  # a receiver's Retry-After is honoured up to an hour
LEASE = 60.0  # a taken delivery is not taken again for this long (a sender that died)
RESULT_MAX = 64 * 1024  # bytes: a target's result rides in its delivery up to this size


def expand(patterns: Iterable[str] | None) -> tuple[str, ...]:
    """The event types a webhook's `events` list asks for (None: terminal events only);
    raises ValueError naming an unknown entry."""
    if patterns is None:
        return DEFAULT_EVENTS
    out: list[str] = []
    for p in patterns:
        kinds = PATTERNS.get(p, (p,) if p in KINDS else None)
        if kinds is None:
            known = ", ".join([*PATTERNS, *KINDS])
            raise ValueError(f"unknown event {p!r} (known: {known})")
        out += [k for k in kinds if k not in out]
    return tuple(out)


def stored(kinds: Sequence[str]) -> str:
    """The column form: `,kind,kind,` so either engine matches a kind with one substring test."""
    return "," + ",".join(kinds) + ","


def spec(url: str, events: str, results) -> tuple[str, tuple[str, ...], bool]:
    """A stored webhook as a submit gives it: `(url, event types, results)`."""
    return url, tuple(k for k in events.split(",") if k), bool(results)


def next_try(
    attempts: int, now: float, retry_after: float | None = None, rng: random.Random | None = None
) -> float | None:
    """When to try again after `attempts` tries failed, or None: no tries left."""
    if attempts >= TRIES:
        return None
    wait = DELAYS[attempts - 1] * (1 + JITTER * (2 * (rng or random).random() - 1))
    if retry_after is not None:
        wait = max(wait, min(retry_after, RETRY_AFTER_MAX))
    return now + wait


def outcome_of(status: int, refused: bool = False) -> str:
    """What an answer is: `status` 0 means no answer (a connection error or a timeout)."""
    if refused:
        return "refused"
    if 200 <= status < 300:
        return "delivered"
    if status == 410:
        return "gone"
    return "retry"


def recorded(outcome: str, retry_at: float | None) -> tuple[str, str, float | None]:
    """One try's answer as stored: (the outcome counted, the delivery's state, its next try).
    A `retry` with no next try left is the last try, so `failed`."""
    if outcome == "retry" and retry_at is None:
        outcome = "failed"
    state = {"delivered": DELIVERED, "retry": PENDING}.get(outcome, FAILED)
    return outcome, state, retry_at if state == PENDING else None


def summary(rows: Sequence[tuple]) -> dict | None:
    """The `webhook` field of a job's status from its deliveries `(event_id, state, attempts,
    last_status, next_try)`: the first failed one, else the first pending one, else the last
    delivered one; None before any."""
    if not rows:
        return None
    ordered = sorted(rows)
    pick = (
        next((r for r in ordered if r[1] == FAILED), None)
        or next((r for r in ordered if r[1] == PENDING), None)
        or ordered[-1]
    )
    _, state, attempts, last_status, when = pick
    return {
        "state": state,
        "attempts": attempts,
        "last_status": last_status,
        "next_try": when if state == PENDING else None,
        "deliveries": len(rows),
    }


class Delivery(NamedTuple):
    """One outbox row taken for sending, with what the sender needs to build and sign it."""

    job_id: str
    event_id: int
    attempts: int  # tries before this one
    url: str
    kind: str
    at: float
    data: str  # the event's stored fields (JSON)
    caller: str  # the job's owner and class: whose secret signs it
    caller_class: str
    result: str | None = None  # a done target's result, when asked for and within RESULT_MAX
    result_bytes: int = 0  # its size (a larger one is left out, and said so)
