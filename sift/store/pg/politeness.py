"""robots.txt verdicts and each host's "not before" time on PostgreSQL, shared by every box.

The same operations and rules as `sift.store.politeness` (docs/WORKER.md §Spacing and waits):
on this engine the tables live in the shared database, so a site's robots.txt is fetched once
per origin per `[fetch] robots_ttl` by all boxes together, and Crawl-delay spacing and an
upstream's Retry-After hold across every worker on every box. `reserve` reads and moves a
host's time under that host's row lock (`INSERT … ON CONFLICT DO UPDATE … WHERE`), so two
workers never both go at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from sift.store import rules
from sift.store.pg.db import PgDatabase, one, rows
from sift.store.records import RobotsEntry


class PgPoliteness:
    def __init__(self, db: PgDatabase):
        self._db = db

    # -- robots.txt ---------------------------------------------------------------------------

    async def robots_get(self, origin: str, now: float) -> RobotsEntry | None:
        row = await self._db.statement(
            lambda c: one(
                c,
                "select origin, fetched_at, expires_at, status, body from robots_txt "
                "where origin = %s and expires_at > %s",
                (origin, now),
            )
        )
        return RobotsEntry(*row) if row else None

    async def robots_put(self, entry: RobotsEntry) -> None:
        """Store the entry; expired ones go, then the oldest until the table fits its bound
        (`rules.ROBOTS_STORED_BYTES`): the newest entries whose bytes fit stay."""

        async def write(c):
            await c.execute("delete from robots_txt where expires_at <= %s", (entry.fetched_at,))
            await c.execute(
                "insert into robots_txt(origin, fetched_at, expires_at, status, nbytes, body) "
                "values (%s, %s, %s, %s, %s, %s) on conflict (origin) do update set "
                "fetched_at = excluded.fetched_at, expires_at = excluded.expires_at, "
                "status = excluded.status, nbytes = excluded.nbytes, body = excluded.body",
                (
                    entry.origin,
                    entry.fetched_at,
                    entry.expires_at,
                    entry.status,
                    len(entry.body.encode()),
                    entry.body,
                ),
            )
            await c.execute(
                "delete from robots_txt where origin in (select origin from (select origin, "
                "sum(nbytes) over (order by fetched_at desc, origin desc) as kept "
                "from robots_txt) k where kept > %s)",
                (rules.ROBOTS_STORED_BYTES,),
            )

        await self._db.transaction(write)

    # -- per-host "not before" --------------------------------------------------------------------

    async def reserve(self, host: str, now: float, spacing: float) -> float | None:
        """As `Politeness.reserve`: None (go now; the next start is `spacing` later), or the
        time before which no batch fetch to the host may start."""
        if spacing <= 0:
            row = await self._db.statement(
                lambda c: one(
                    c,
                    "select not_before from host_pace where host = %s and not_before > %s",
                    (host, now),
                )
            )
            return row[0] if row else None

        async def write(c):
            # The conflict takes the host's row lock even when the WHERE keeps the row as is.
            moved = await one(
                c,
                "insert into host_pace(host, not_before, reason) values (%s, %s, 'crawl_delay') "
                "on conflict (host) do update set not_before = excluded.not_before, "
                "reason = excluded.reason where host_pace.not_before <= %s returning 1",
                (host, now + spacing, now),
            )
            if moved is None:
                row = await one(c, "select not_before from host_pace where host = %s", (host,))
                return row[0]
            await c.execute("delete from host_pace where not_before <= %s", (now,))
            return None

        return await self._db.transaction(write)

    async def defer(self, host: str, until: float, now: float) -> None:
        """No batch fetch to `host` before `until` (an upstream's Retry-After)."""

        async def write(c):
            await c.execute("delete from host_pace where not_before <= %s", (now,))
            await c.execute(
                "insert into host_pace(host, not_before, reason) values (%s, %s, 'retry_after') "
                "on conflict (host) do update set reason = case when excluded.not_before > "
                "host_pace.not_before then excluded.reason else host_pace.reason end, "
                "not_before = greatest(host_pace.not_before, excluded.not_before)",
                (host, until),
            )

        await self._db.transaction(write)

    async def waits(self, hosts: Iterable[str], now: float) -> dict[str, float]:
        """The hosts among `hosts` that must wait, with their not-before times."""
        hosts = sorted(set(hosts))
        if not hosts:
            return {}
        found = await self._db.statement(
            lambda c: rows(
                c,
                "select host, not_before from host_pace where host = any(%s) and not_before > %s",
                (hosts, now),
            )
        )
        return dict(found)
