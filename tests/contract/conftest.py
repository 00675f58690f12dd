"""The store contract suite runs every rule against both engines (docs/ARCHITECTURE.md §Two
engines), through the production factory `open_store`: a rule cannot hold on one and not the
other. SQLite runs on a real file; PostgreSQL on the throwaway server of tests/pg.py, skipped
with the reason when none can be started. Several stores on one database stand for several
processes (or boxes)."""

from __future__ import annotations

import pytest

from sift import config
from sift.store import open_store


class Engine:
    """One engine's store, plus what the tests read besides its operations."""

    def __init__(self, name: str, store):
        self.name = name
        self.store = store
        self.batch = store.batch

    async def counter(self, name: str, label: str) -> float:
        return (await self.store.batch_series()).counters.get((name, label), 0.0)

    async def gauges(self) -> tuple[int, int]:
        series = await self.store.batch_series()
        return series.queue_depth, series.inflight

    async def close(self) -> None:
        await self.store.aclose()


async def open_engine(kind: str, request, tmp_path) -> Engine:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    raw = {"store": {"state_dir": str(state)}}
    if kind == "postgres":
        if not hasattr(request.node, "_pg_dsn"):
            request.node._pg_dsn = request.getfixturevalue("pg_dsn")
        raw["store"].update(engine="postgres", dsn=request.node._pg_dsn)
    return Engine(kind, open_store(config.from_dict(raw)))


@pytest.fixture(params=["sqlite", "postgres"])
async def engine(request, tmp_path, monkeypatch):
    monkeypatch.delenv("SIFT_DATABASE_URL", raising=False)
    e = await open_engine(request.param, request, tmp_path)
    yield e
    await e.close()
