"""The content cache (TTL, LRU by bytes, caller-class partition) and the digest cache."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sift.store import CachedResponse
from sift.store.cache import ContentCache, DigestCache
from sift.store.db import Database
from tests.dbview import DbView

T0 = 1_700_000_000.0


@pytest.fixture
def db(tmp_path):
    d = Database(tmp_path / "sift.db")
    yield d
    d.close()


def _store(db, *, ttl=900.0, max_bytes=1000, digest_ttl=3600.0) -> SimpleNamespace:
    return SimpleNamespace(
        cache=ContentCache(db, ttl=ttl, max_bytes=max_bytes),
        digests=DigestCache(db, ttl=digest_ttl),
    )


def _resp(url: str, size: int = 100, fetched_at: float = T0, fill: bytes = b"x") -> CachedResponse:
    return CachedResponse(url, url + "?final", 200, "text/html", fill * size, fetched_at)


def _urls(db) -> set[tuple[str, str]]:
    return set(
        db.read(lambda c: c.execute("select caller_class, url from content_cache").fetchall())
    )


# -- content cache ---------------------------------------------------------------------------


async def test_content_cache_returns_a_fresh_entry_as_it_was_put(db):
    cache = _store(db).cache
    resp = _resp("http://127.0.0.1:9/a", fill=b"\x00\xff")
    await cache.put("fleet", resp, T0)
    assert await cache.get("fleet", "http://127.0.0.1:9/a", T0 + 1) == resp
    assert DbView(db.path).cache_bytes() == 200


async def test_content_cache_entry_expires_at_fetched_at_plus_ttl(db):
    cache = _store(db, ttl=100).cache
    # The age counts from the fetch, not from the put.
    await cache.put("fleet", _resp("a", fetched_at=T0), T0 + 50)
    assert await cache.get("fleet", "a", T0 + 99.5) is not None
    assert await cache.get("fleet", "a", T0 + 100) is None
    assert await cache.get("fleet", "a", T0 + 101) is None
    # A later put clears expired entries out of the byte total.
    await cache.put("fleet", _resp("b", fetched_at=T0 + 200), T0 + 200)
    assert _urls(db) == {("fleet", "b")}
    assert DbView(db.path).cache_bytes() == 100


async def test_content_cache_evicts_least_recently_used_entries_until_within_max_bytes(db):
    cache = _store(db, max_bytes=300).cache
    await cache.put("fleet", _resp("a"), T0 + 1)
    await cache.put("fleet", _resp("b"), T0 + 2)
    await cache.put("fleet", _resp("c"), T0 + 3)
    assert DbView(db.path).cache_bytes() == 300  # exactly at the budget: nothing goes
    await cache.put("fleet", _resp("big", size=200), T0 + 4)
    assert _urls(db) == {("fleet", "c"), ("fleet", "big")}
    assert DbView(db.path).cache_bytes() == 300


async def test_a_cache_hit_protects_the_entry_from_lru_eviction(db):
    cache = _store(db, max_bytes=300).cache
    await cache.put("fleet", _resp("a"), T0 + 1)
    await cache.put("fleet", _resp("b"), T0 + 2)
    await cache.put("fleet", _resp("c"), T0 + 3)
    assert await cache.get("fleet", "a", T0 + 4) is not None
    await cache.put("fleet", _resp("d"), T0 + 5)
    assert _urls(db) == {("fleet", "a"), ("fleet", "c"), ("fleet", "d")}


async def test_a_put_never_evicts_the_entry_it_just_stored(db):
    cache = _store(db, max_bytes=150).cache
    # Same clock reading for both: the older entry must go, not the one being stored.
    await cache.put("fleet", _resp("z-old"), T0)
    await cache.put("fleet", _resp("a-new"), T0)
    assert _urls(db) == {("fleet", "a-new")}
    assert await cache.get("fleet", "a-new", T0) is not None


async def test_content_cache_is_partitioned_by_caller_class(db):
    cache = _store(db).cache
    await cache.put("fleet", _resp("u", fill=b"f"), T0)
    assert await cache.get("restricted", "u", T0 + 1) is None
    await cache.put("restricted", _resp("u", fill=b"r"), T0)
    assert (await cache.get("fleet", "u", T0 + 1)).body == b"f" * 100
    assert (await cache.get("restricted", "u", T0 + 1)).body == b"r" * 100


async def test_content_cache_replaces_an_entry_for_the_same_url(db):
    cache = _store(db).cache
    await cache.put("fleet", _resp("u", size=100), T0)
    await cache.put("fleet", _resp("u", size=40, fetched_at=T0 + 5, fill=b"n"), T0 + 5)
    assert DbView(db.path).cache_bytes() == 40
    hit = await cache.get("fleet", "u", T0 + 6)
    assert (hit.body, hit.fetched_at) == (b"n" * 40, T0 + 5)


async def test_content_cache_skips_a_body_larger_than_the_whole_budget(db):
    cache = _store(db, max_bytes=150).cache
    await cache.put("fleet", _resp("kept"), T0)
    await cache.put("fleet", _resp("huge", size=151), T0 + 1)
    assert _urls(db) == {("fleet", "kept")}


@pytest.mark.parametrize(("ttl", "max_bytes"), [(0, 1000), (900, 0)], ids=["ttl0", "bytes0"])
async def test_content_cache_with_zero_ttl_or_budget_keeps_nothing(db, ttl, max_bytes):
    cache = _store(db, ttl=ttl, max_bytes=max_bytes).cache
    await cache.put("fleet", _resp("u", size=1), T0)
    assert await cache.get("fleet", "u", T0) is None
    assert DbView(db.path).cache_bytes() == 0


async def test_content_cache_is_separate_from_batch_bytes(db):
    store = _store(db, max_bytes=100)
    await store.cache.put("fleet", _resp("u", size=100), T0)
    assert DbView(db.path).batch_nbytes() == 0
    assert DbView(db.path).cache_bytes() == 100


# -- digest cache ----------------------------------------------------------------------------


async def test_digest_cache_returns_a_fresh_value_until_created_at_plus_ttl(db):
    digests = _store(db, digest_ttl=60).digests
    await digests.put("fleet", "k", "answer", T0)
    assert await digests.get("fleet", "k", T0 + 59.5) == "answer"
    assert await digests.get("fleet", "k", T0 + 60) is None
    await digests.put("fleet", "k", "newer", T0 + 100)
    assert await digests.get("fleet", "k", T0 + 159) == "newer"


async def test_digest_cache_put_clears_expired_entries(db):
    digests = _store(db, digest_ttl=60).digests
    await digests.put("fleet", "old", "1", T0)
    await digests.put("fleet", "fresh", "2", T0 + 30)
    await digests.put("fleet", "now", "3", T0 + 60)
    keys = db.read(lambda c: c.execute("select key from digest_cache order by key").fetchall())
    assert keys == [("fresh",), ("now",)]


async def test_digest_cache_is_partitioned_by_caller_class(db):
    digests = _store(db).digests
    await digests.put("fleet", "k", "for fleet", T0)
    assert await digests.get("restricted", "k", T0) is None
    await digests.put("restricted", "k", "for restricted", T0)
    assert await digests.get("fleet", "k", T0) == "for fleet"
    assert await digests.get("restricted", "k", T0) == "for restricted"


async def test_digest_cache_keeps_at_most_max_entries_oldest_first(db):
    cache = DigestCache(db, ttl=3600, max_entries=3)
    for i in range(5):
        await cache.put("fleet", f"k{i}", f"v{i}", T0 + i)
    kept = [k for k in (f"k{i}" for i in range(5)) if await cache.get("fleet", k, T0 + 10)]
    assert kept == ["k2", "k3", "k4"]
