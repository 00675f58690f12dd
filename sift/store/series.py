"""The batch metric series kept in the database, whatever the engine: their names, the
outcomes each counts, and how an observation becomes counter rows (docs/ARCHITECTURE.md
§Metrics across two processes)."""

from __future__ import annotations

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


def folded(name: str, label: str) -> str:
    """`label` as series `name` counts it."""
    return fold(label, KNOWN.get(name))


def observation(
    name: str, value: float, buckets: tuple[float, ...]
) -> list[tuple[str, str, float]]:
    """A histogram observation as counter rows: one for the bucket it falls in (`bucket=…`,
    the first bound at or above it, else `+Inf`), plus `sum` and `count`; `cumulative` turns
    the rows into Prometheus' `le` counts at scrape time."""
    bound = next((le for le in buckets if value <= le), "+Inf")
    return [(name, f"bucket={bound}", 1.0), (name, "sum", value), (name, "count", 1.0)]


def cumulative(
    rows: dict[tuple[str, str], float], name: str, buckets: tuple[float, ...]
) -> list[tuple[float | str, float]]:
    """(upper bound, observations at or below it) for every bound and `+Inf`."""
    out, running = [], 0.0
    for bound in (*buckets, "+Inf"):
        running += rows.get((name, f"bucket={bound}"), 0.0)
        out.append((bound, running))
    return out
