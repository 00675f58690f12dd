"""The store contract suite runs every rule against both engines (docs/ARCHITECTURE.md §Two
engines): a rule cannot hold on one and not the other. The Postgres half needs the throwaway
server of tests/pg.py and is skipped, with the reason, when none can be started."""

from __future__ import annotations

import pytest

from sift.store.pg import counters as pg_counters
from sift.store.pg.batch import PgBatchStore
from sift.store.pg.db import PgDatabase


class Engine:
    """One engine's batch store, plus what the tests read besides it."""

    def __init__(self, name: str, batch, counters, close):
        self.name = name
        self.batch = batch
        self._counters = counters
        self._close = close

    async def counter(self, name: str, label: str) -> float:
        return (await self._counters()).get((name, label), 0.0)

    async def close(self) -> None:
        await self._close()


async def open_engine(kind: str, request, tmp_path, *, worker: str | None = "w-test") -> Engine:
    if kind == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        db = PgDatabase(dsn)
        return Engine(
            kind,
            PgBatchStore(db, worker=worker),
            lambda: db.transaction(pg_counters.read_all),
            db.close,
        )
    raise AssertionError(kind)


@pytest.fixture(params=["postgres"])
async def engine(request, tmp_path):
    e = await open_engine(request.param, request, tmp_path)
    yield e
    await e.close()
