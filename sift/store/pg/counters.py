"""Metric counter rows in PostgreSQL: the series of `sift.store.series`, folded the same way.

Rows are bumped in a fixed (name, label) order and merged first, so two boxes bumping
overlapping rows take their row locks in the same order and never deadlock on them.
"""

from __future__ import annotations

from sift.store.pg.db import Conn, rows
from sift.store.series import folded


async def bump_many(conn: Conn, bumps: list[tuple[str, str, float]]) -> None:
    merged: dict[tuple[str, str], float] = {}
    for name, label, by in bumps:
        key = (name, folded(name, label))
        merged[key] = merged.get(key, 0.0) + by
    if not merged:
        return
    keys = sorted(merged)
    await conn.execute(
        "insert into counter(name, label, value) values "
        + ", ".join("(%s, %s, %s)" for _ in keys)
        + " on conflict (name, label) do update set value = counter.value + excluded.value",
        [v for key in keys for v in (*key, merged[key])],
    )


async def bump(conn: Conn, name: str, label: str, by: float = 1.0) -> None:
    await bump_many(conn, [(name, label, by)])


async def read_all(conn: Conn) -> dict[tuple[str, str], float]:
    return {(n, lbl): v for n, lbl, v in await rows(conn, "select name, label, value from counter")}
