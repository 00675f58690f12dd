"""Metric counters kept in the database, so both processes' batch series reach one scrape.

The worker's and the API's batch events bump these rows inside the same write transaction as
the state change they count, so a count can neither be lost nor doubled, and they survive a
worker restart. The API's /metrics collector turns them back into Prometheus families.
"""

from __future__ import annotations

import apsw

from sift.constants import JOB_OUTCOMES, TARGET_OUTCOMES, WEBHOOK_OUTCOMES

JOBS_TOTAL = "sift_batch_jobs_total"
TARGETS_TOTAL = "sift_batch_targets_total"
JOB_SECONDS = "sift_batch_job_seconds"
TARGET_SECONDS = "sift_batch_target_seconds"
RESULT_BYTES = "sift_batch_result_bytes"
WEBHOOK_DELIVERIES = "sift_webhook_deliveries_total"
KNOWN = {
    JOBS_TOTAL: JOB_OUTCOMES,
    TARGETS_TOTAL: TARGET_OUTCOMES,
    WEBHOOK_DELIVERIES: WEBHOOK_OUTCOMES,
}


def fold(outcome: str, known: tuple[str, ...] | None) -> str:
    """An outcome outside a counter's known set is counted as `other`."""
    return outcome if known is None or outcome in known else "other"


def bump(cur: apsw.Cursor, name: str, label: str, by: float = 1.0) -> None:
    cur.execute(
        "insert into counter(name, label, value) values (?, ?, ?) "
        "on conflict(name, label) do update set value = value + excluded.value",
        (name, fold(label, KNOWN.get(name)), by),
    )


def observation(
    name: str, value: float, buckets: tuple[float, ...]
) -> list[tuple[str, str, float]]:
    """A histogram observation as counter rows: one for the bucket it falls in (`bucket=…`,
    the first bound at or above it, else `+Inf`), plus `sum` and `count`; `cumulative` turns
    the rows into Prometheus' `le` counts at scrape time."""
    bound = next((le for le in buckets if value <= le), "+Inf")
    return [(name, f"bucket={bound}", 1.0), (name, "sum", value), (name, "count", 1.0)]


def bump_many(cur: apsw.Cursor, rows: list[tuple[str, str, float]]) -> None:
    """Several counter bumps in one statement (one upsert per row)."""
    if not rows:
        return
    cur.execute(
        "insert into counter(name, label, value) values "
        + ", ".join("(?, ?, ?)" for _ in rows)
        + " on conflict(name, label) do update set value = value + excluded.value",
        [v for name, label, by in rows for v in (name, fold(label, KNOWN.get(name)), by)],
    )


def cumulative(
    rows: dict[tuple[str, str], float], name: str, buckets: tuple[float, ...]
) -> list[tuple[float | str, float]]:
    """(upper bound, observations at or below it) for every bound and `+Inf`."""
    out, running = [], 0.0
    for bound in (*buckets, "+Inf"):
        running += rows.get((name, f"bucket={bound}"), 0.0)
        out.append((bound, running))
    return out


def read_all(cur: apsw.Cursor) -> dict[tuple[str, str], float]:
    return {(n, lbl): v for n, lbl, v in cur.execute("select name, label, value from counter")}
