"""The politeness store's rules (docs/WORKER.md §Spacing and waits, §robots.txt), each asserted
on both engines: robots.txt verdicts until they expire, bounded by bytes, and each host's "not
before" time, shared by every process of the store (on postgres, every box)."""

from __future__ import annotations

import asyncio

import pytest

from sift.store import rules
from sift.store.records import RobotsEntry
from tests.contract.conftest import open_engine

T0 = 1_700_000_000.0


def _entry(origin: str, at: float, body: str = "User-agent: *\nDisallow: /x\n", ttl=60.0):
    return RobotsEntry(origin, at, at + ttl, 200, body)


@pytest.fixture
async def elsewhere(engine, request, tmp_path):
    """The store as another worker sees it: another process on the same box (sqlite, same
    file) or a worker on another box (postgres: its own state dir, the same database)."""
    where = tmp_path if engine.name == "sqlite" else tmp_path / "other-box"
    where.mkdir(exist_ok=True)
    other = await open_engine(engine.name, request, where)
    yield other.store.politeness
    await other.close()


async def test_a_robots_entry_is_read_back_until_it_expires(engine):
    p = engine.store.politeness
    entry = _entry("http://127.0.0.1:8080", T0)
    await p.robots_put(entry)
    assert await p.robots_get("http://127.0.0.1:8080", T0 + 59) == entry
    assert await p.robots_get("http://127.0.0.1:8080", T0 + 60) is None
    assert await p.robots_get("http://127.0.0.1:8081", T0) is None


async def test_a_robots_entry_put_again_replaces_the_old_one(engine):
    p = engine.store.politeness
    await p.robots_put(_entry("http://127.0.0.1:8080", T0))
    newer = RobotsEntry("http://127.0.0.1:8080", T0 + 1, T0 + 61, 404, "")
    await p.robots_put(newer)
    assert await p.robots_get("http://127.0.0.1:8080", T0 + 2) == newer


async def test_robots_entries_are_bounded_by_bytes_oldest_first(engine, monkeypatch):
    monkeypatch.setattr(rules, "ROBOTS_STORED_BYTES", 250)
    p = engine.store.politeness
    for i in range(4):
        await p.robots_put(_entry(f"http://127.0.0.{i + 1}", T0 + i, "x" * 100, ttl=600))
    kept = [await p.robots_get(f"http://127.0.0.{i + 1}", T0 + 5) for i in range(4)]
    assert [e is not None for e in kept] == [False, False, True, True]


async def test_robots_entries_are_shared_by_every_process(engine, elsewhere):
    entry = _entry("http://127.0.0.1:8080", T0)
    await engine.store.politeness.robots_put(entry)
    assert await elsewhere.robots_get("http://127.0.0.1:8080", T0 + 1) == entry


async def test_reserve_spaces_starts_to_a_host_by_the_spacing(engine):
    p = engine.store.politeness
    assert await p.reserve("a.test", T0, 2.0) is None
    assert await p.reserve("a.test", T0 + 1, 2.0) == T0 + 2
    assert await p.reserve("b.test", T0 + 1, 2.0) is None  # another host goes at once
    assert await p.reserve("a.test", T0 + 2, 2.0) is None
    assert await p.waits(["a.test", "b.test", "c.test"], T0 + 2.5) == {
        "a.test": T0 + 4, "b.test": T0 + 3,
    }  # fmt: skip


async def test_reserve_without_spacing_only_reads_a_wait(engine):
    p = engine.store.politeness
    assert await p.reserve("a.test", T0, 0) is None
    assert await p.waits(["a.test"], T0) == {}
    await p.defer("a.test", T0 + 30, T0)
    assert await p.reserve("a.test", T0 + 1, 0) == T0 + 30


async def test_defer_keeps_the_later_of_two_waits(engine):
    p = engine.store.politeness
    await p.defer("a.test", T0 + 30, T0)
    await p.defer("a.test", T0 + 10, T0)
    assert await p.waits(["a.test"], T0 + 1) == {"a.test": T0 + 30}
    assert await p.reserve("a.test", T0 + 29, 2.0) == T0 + 30
    assert await p.reserve("a.test", T0 + 30, 2.0) is None


async def test_spacing_holds_across_every_process_of_the_store(engine, elsewhere):
    here = engine.store.politeness
    assert await here.reserve("a.test", T0, 5.0) is None
    assert await elsewhere.reserve("a.test", T0 + 1, 5.0) == T0 + 5
    await elsewhere.defer("b.test", T0 + 60, T0)
    assert await here.waits(["b.test"], T0 + 1) == {"b.test": T0 + 60}


async def test_concurrent_reserves_let_exactly_one_start_go(engine, elsewhere):
    stores = [engine.store.politeness, elsewhere] * 4
    got = await asyncio.gather(*[p.reserve("a.test", T0, 5.0) for p in stores])
    assert sorted(got, key=lambda g: g is not None) == [None] + [T0 + 5] * 7
