"""The content cache and the digest cache, partitioned by caller class.

Raw responses are kept for `ttl` seconds and the table is bounded by `max_bytes`, least
recently used first. Every key includes the caller class, so a restricted caller can never see
a fleet caller's fetch (not even as `cached: true`), and the other way round.
"""

from __future__ import annotations

import asyncio

import apsw

from sift.store.db import Database
from sift.store.records import CachedResponse

DIGEST_TTL = 86400.0  # seconds an answer is kept
LRU_RESOLUTION = 1.0  # seconds: a hit within this of the last one does not write


class ContentCache:
    def __init__(self, db: Database, *, ttl: float, max_bytes: int):
        self._db = db
        self.ttl = ttl
        self.max_bytes = max_bytes

    @property
    def enabled(self) -> bool:
        return self.ttl > 0 and self.max_bytes > 0

    async def get(self, caller_class: str, url: str, now: float) -> CachedResponse | None:
        """A fresh entry. A miss is a read only; a hit also marks the entry used (a small
        write), at most once per `LRU_RESOLUTION` seconds, which is all the LRU needs. Both
        run on the event loop when the database is free that instant (`Database.read_now`)."""
        if not self.enabled:
            return None
        row = await self._db.read_now(
            lambda c: c.execute(
                "select url, final_url, status, content_type, body, fetched_at, used_at "
                "from content_cache where caller_class = ? and url = ? and fetched_at + ? > ?",
                (caller_class, url, self.ttl, now),
            ).fetchone()
        )
        if row is None:
            return None
        if now - row[6] >= LRU_RESOLUTION:
            await self._db.write_now(
                lambda c: c.execute(
                    "update content_cache set used_at = ? where caller_class = ? and url = ?",
                    (now, caller_class, url),
                )
            )
        return CachedResponse(row[0], row[1], row[2], row[3], bytes(row[4]), row[5])

    def put(self, caller_class: str, resp: CachedResponse, now: float) -> asyncio.Future[None]:
        """Store a response, within the TTL and the byte budget (least recently used first).

        Not a coroutine: the write is queued on the writer thread at once, so it proceeds
        while the caller renders the page; await the future for its end.
        """
        return self._db.on_writer(lambda c: self._put(c, caller_class, resp, now))

    def _put(self, c: apsw.Cursor, caller_class: str, resp: CachedResponse, now: float) -> None:
        nbytes = len(resp.body)
        if self.ttl <= 0 or nbytes > self.max_bytes:
            return
        c.execute(
            "insert or replace into content_cache(caller_class, url, final_url, status, "
            "content_type, body, nbytes, fetched_at, used_at) values (?,?,?,?,?,?,?,?,?)",
            (
                caller_class,
                resp.url,
                resp.final_url,
                resp.status,
                resp.content_type,
                resp.body,
                nbytes,
                resp.fetched_at,
                now,
            ),
        )
        c.execute("delete from content_cache where fetched_at + ? <= ?", (self.ttl, now))
        total = c.execute("select coalesce(sum(nbytes), 0) from content_cache").fetchone()[0]
        if total <= self.max_bytes:
            return
        victims = []
        # Never the entry just stored: it fits the budget alone, and with a tied clock
        # reading it could otherwise sort before older entries.
        for cls, url, n in c.execute(
            "select caller_class, url, nbytes from content_cache "
            "where not (caller_class = ? and url = ?) order by used_at",
            (caller_class, resp.url),
        ):
            if total <= self.max_bytes:
                break
            victims.append((cls, url))
            total -= n
        c.executemany("delete from content_cache where caller_class = ? and url = ?", victims)


class DigestCache:
    """Answers (and embeddings) keyed by caller class and a hash of their inputs.

    Bounded by `ttl` and by `max_entries` (the oldest go first)."""

    def __init__(self, db: Database, *, ttl: float = DIGEST_TTL, max_entries: int = 10_000):
        self._db = db
        self.ttl = ttl
        self.max_entries = max_entries

    async def get(self, caller_class: str, key: str, now: float) -> str | None:
        row = await self._db.on_reader(
            lambda c: c.execute(
                "select value from digest_cache where caller_class = ? and key = ? "
                "and created_at + ? > ?",
                (caller_class, key, self.ttl, now),
            ).fetchone()
        )
        return row[0] if row else None

    async def put(self, caller_class: str, key: str, value: str, now: float) -> None:
        await self._db.on_writer(lambda c: self._put(c, caller_class, key, value, now))

    def _put(self, c: apsw.Cursor, caller_class: str, key: str, value: str, now: float) -> None:
        c.execute(
            "insert or replace into digest_cache(caller_class, key, value, created_at) "
            "values (?, ?, ?, ?)",
            (caller_class, key, value, now),
        )
        c.execute("delete from digest_cache where created_at + ? <= ?", (self.ttl, now))
        over = c.execute("select count(*) from digest_cache").fetchone()[0] - self.max_entries
        if over > 0:
            c.execute(
                "delete from digest_cache where rowid in (select rowid from digest_cache "
                "order by created_at limit ?)",
                (over,),
            )
