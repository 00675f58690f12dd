"""Metric counter rows in PostgreSQL: the series of `sift.store.series`, folded the same way.

Rows are bumped in a fixed (name, label) order and merged first, so two boxes bumping
overlapping rows take their row locks in the same order and never deadlock on them.
"""

from __future__ import annotations

from sift.store.pg.db import Conn, rows
from sift.store.series import folded


def merged(bumps: list[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    """The rows folded and merged, in (name, label) order."""
    by_key: dict[tuple[str, str], float] = {}
    for name, label, by in bumps:
        key = (name, folded(name, label))
        by_key[key] = by_key.get(key, 0.0) + by
    return [(*key, by_key[key]) for key in sorted(by_key)]


_UPSERT = " on conflict (name, label) do update set value = counter.value + excluded.value"


async def bump_many(conn: Conn, bumps: list[tuple[str, str, float]]) -> None:
    found = merged(bumps)
    if not found:
        return
    await conn.execute(
        "insert into counter(name, label, value) values "
        + ", ".join("(%s, %s, %s)" for _ in found)
        + _UPSERT,
        [v for row in found for v in row],
    )


def bump_cte(name: str, bumps: list[tuple[str, str, float]], when: str) -> tuple[str, list]:
    """A CTE bumping the rows (already `merged`) when the SQL condition `when` holds, and its
    arguments: a statement's change counted by the statement itself."""
    values = ", ".join("(%s::text, %s::text, %s::float8)" for _ in bumps)
    return (
        f"{name} as (insert into counter(name, label, value) select v.n, v.l, v.v "
        f"from (values {values}) v(n, l, v) where {when}{_UPSERT})",
        [v for row in bumps for v in row],
    )


async def bump(conn: Conn, name: str, label: str, by: float = 1.0) -> None:
    await bump_many(conn, [(name, label, by)])


async def read_all(conn: Conn) -> dict[tuple[str, str], float]:
    return {(n, lbl): v for n, lbl, v in await rows(conn, "select name, label, value from counter")}
