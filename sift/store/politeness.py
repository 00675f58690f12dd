"""robots.txt verdicts per origin and each host's "not before" time, shared by both processes.

`robots_txt` keeps a site's robots.txt (or the fact that it had none, or could not be read)
until it expires, so the API and the worker fetch it once per origin per `[fetch] robots_ttl`.
The table is bounded by bytes, oldest first (`rules.ROBOTS_STORED_BYTES`). `host_pace` holds the
earliest time the next batch fetch to a host may start: the Crawl-delay spacing and an
upstream's Retry-After land here (docs/WORKER.md §Spacing and waits). `reserve` reads and moves
it in one write transaction, so two drain tasks, or two processes, never both go at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from sift.store import rules
from sift.store.db import Database
from sift.store.records import RobotsEntry


class Politeness:
    def __init__(self, db: Database):
        self._db = db

    async def _read(self, fn):
        return await self._db.read_now(fn)

    async def _write(self, fn):
        return await self._db.write_now(fn)

    # -- robots.txt ---------------------------------------------------------------------------

    async def robots_get(self, origin: str, now: float) -> RobotsEntry | None:
        row = await self._read(
            lambda c: c.execute(
                "select origin, fetched_at, expires_at, status, body from robots_txt "
                "where origin = ? and expires_at > ?",
                (origin, now),
            ).fetchone()
        )
        return RobotsEntry(*row) if row else None

    async def robots_put(self, entry: RobotsEntry) -> None:
        nbytes = len(entry.body.encode())

        def write(c):
            c.execute("delete from robots_txt where expires_at <= ?", (entry.fetched_at,))
            c.execute(
                "insert or replace into robots_txt(origin, fetched_at, expires_at, status, "
                "nbytes, body) values (?, ?, ?, ?, ?, ?)",
                (
                    entry.origin,
                    entry.fetched_at,
                    entry.expires_at,
                    entry.status,
                    nbytes,
                    entry.body,
                ),
            )
            total = c.execute("select coalesce(sum(nbytes), 0) from robots_txt").fetchone()[0]
            if total <= rules.ROBOTS_STORED_BYTES:
                return
            for origin, size in c.execute(
                "select origin, nbytes from robots_txt order by fetched_at"
            ).fetchall():
                if total <= rules.ROBOTS_STORED_BYTES:
                    break
                c.execute("delete from robots_txt where origin = ?", (origin,))
                total -= size

        await self._write(write)

    # -- per-host "not before" --------------------------------------------------------------------

    async def reserve(self, host: str, now: float, spacing: float) -> float | None:
        """Take the host's next start: None (go now; the next start is `spacing` later), or
        the time before which no batch fetch to the host may start. Without spacing this is
        a read: a host nobody asked to wait costs a batch fetch no write transaction."""
        if spacing <= 0:
            rows = await self._read(
                lambda c: c.execute(
                    "select not_before from host_pace where host = ? and not_before > ?",
                    (host, now),
                ).fetchall()
            )
            return rows[0][0] if rows else None

        def write(c):
            row = c.execute("select not_before from host_pace where host = ?", (host,)).fetchone()
            if row is not None and row[0] > now:
                return row[0]
            c.execute("delete from host_pace where not_before <= ?", (now,))
            if spacing > 0:
                c.execute(
                    "insert or replace into host_pace(host, not_before, reason) "
                    "values (?, ?, 'crawl_delay')",
                    (host, now + spacing),
                )
            return None

        return await self._write(write)

    async def defer(self, host: str, until: float, now: float) -> None:
        """No batch fetch to `host` before `until` (an upstream's Retry-After). Past waits
        are dropped here and in `reserve`, so the table holds only hosts that must wait."""

        def write(c):
            c.execute("delete from host_pace where not_before <= ?", (now,))
            c.execute(
                "insert into host_pace(host, not_before, reason) values (?, ?, 'retry_after') "
                "on conflict(host) do update set "
                "reason = iif(excluded.not_before > not_before, excluded.reason, reason), "
                "not_before = max(not_before, excluded.not_before)",
                (host, until),
            )

        await self._write(write)

    async def waits(self, hosts: Iterable[str], now: float) -> dict[str, float]:
        """The hosts among `hosts` that must wait, with their not-before times."""
        hosts = sorted(set(hosts))
        if not hosts:
            return {}
        marks = ", ".join("?" * len(hosts))
        rows = await self._read(
            lambda c: c.execute(
                f"select host, not_before from host_pace where host in ({marks}) "
                "and not_before > ?",
                (*hosts, now),
            ).fetchall()
        )
        return dict(rows)
