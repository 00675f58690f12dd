"""Metric counters kept in the SQLite file, so both processes' batch series reach one scrape.

The worker's and the API's batch events bump these rows inside the same write transaction as
the state change they count, so a count can neither be lost nor doubled, and they survive a
worker restart. The API's /metrics collector turns them back into Prometheus families; the
series themselves are `sift.store.series`.
"""

from __future__ import annotations

import apsw

from sift.store.series import folded


def bump(cur: apsw.Cursor, name: str, label: str, by: float = 1.0) -> None:
    cur.execute(
        "insert into counter(name, label, value) values (?, ?, ?) "
        "on conflict(name, label) do update set value = value + excluded.value",
        (name, folded(name, label), by),
    )


def bump_many(cur: apsw.Cursor, rows: list[tuple[str, str, float]]) -> None:
    """Several counter bumps in one statement (one upsert per row)."""
    if not rows:
        return
    cur.execute(
        "insert into counter(name, label, value) values "
        + ", ".join("(?, ?, ?)" for _ in rows)
        + " on conflict(name, label) do update set value = value + excluded.value",
        [v for name, label, by in rows for v in (name, folded(name, label), by)],
    )


def read_all(cur: apsw.Cursor) -> dict[tuple[str, str], float]:
    return {(n, lbl): v for n, lbl, v in cur.execute("select name, label, value from counter")}
