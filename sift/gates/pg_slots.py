"""Slots as PostgreSQL advisory locks: the gates' primitive when several boxes share one
database (engine postgres; docs/GATES.md §Across boxes).

A slot is the session-level advisory lock `(group key, n)`: holding it means this process's
gate session holds that lock. The server drops a session's advisory locks when the session
ends, however it ends (the process exits or is killed, its box loses the connection and the
server's TCP keepalive gives up), which is the same "freed by the kernel" property the lock
files have on one box; no lease or stale-lock sweep is needed.

Like `flock` on one fd, an advisory lock is re-entrant within its session, so the table also
records which slots this process holds and for which permit (the same rules as `SlotTable`).
A group is tried in one round trip: the server walks `n = 0, 1, …` and stops at the first lock
it gets. A lost connection frees every slot this process held; the table forgets them (their
permits' releases become no-ops), reconnects on the next take, and answers "no slot" while the
database is unreachable, which only ever errs on the side of fewer fetches.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import threading

import psycopg

from sift.errors import GatesUnreachable

log = logging.getLogger("sift.gates")

# TCP keepalive for the gate session: a box that vanishes frees its slots within about
# idle + interval x count seconds (ignored on a Unix socket, where the kernel tells at once).
KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}

# CASE fixes the order: the planner may reorder plain AND-ed quals, and a lock re-taken on a
# slot this session already holds would be counted twice and outlive its release.
_TAKE = (
    "select n from generate_series(0, %s - 1) as n "
    "where case when n = any(%s) then false else pg_try_advisory_lock(%s, n) end limit 1"
)


# The deployment's key for the slot hash, shared by every box through the database (a box's
# own state dir would give each box its own buckets). The gates' own table, made on first use
# under a transaction lock, so gates work on a database the store has not migrated yet.
_SECRET_LOCK = 0x5_1F7_0003
_SECRET_TABLE = (
    "create table if not exists gate_secret(id integer primary key, value bytea not null)"
)
_SECRET_PUT = "insert into gate_secret(id, value) values (1, %s) on conflict (id) do nothing"
_SECRET_GET = "select value from gate_secret where id = 1"


def group_key(prefix: str) -> int:
    """The advisory lock class of a slot group: a signed 32-bit hash, the same everywhere.
    (Its two-integer form never conflicts with the store's one-bigint locks.)"""
    digest = hashlib.blake2b(f"sift-gate:{prefix}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


UNREACHABLE = "fetch limits unavailable: their database cannot be reached; try again later"


class PgSlotTable:
    def __init__(self, dsn: str):
        self.dsn = dsn
        self._conn: psycopg.Connection | None = None
        self._held: dict[str, object] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._secret: bytes | None = None

    def secret(self) -> bytes | None:
        """The deployment's slot-hash key, made by the first box that asks; None while the
        database is unreachable (an acquire then finds no room)."""
        with self._lock:
            if self._secret is None:
                try:
                    conn = self._session()
                    with conn.transaction():
                        conn.execute("select pg_advisory_xact_lock(%s)", (_SECRET_LOCK,))
                        conn.execute(_SECRET_TABLE)
                        conn.execute(_SECRET_PUT, (secrets.token_bytes(32),))
                        self._secret = bytes(conn.execute(_SECRET_GET).fetchone()[0])
                except psycopg.Error as e:
                    self._lost(e)
            return self._secret

    def _session(self) -> psycopg.Connection:
        if self._pid != os.getpid():  # a forked child holds nothing and must not share it
            self._conn, self._held, self._pid = None, {}, os.getpid()
        if self._conn is None or self._conn.closed:
            self._held.clear()  # a new session: whatever the old one held is free
            self._conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5, **KEEPALIVE)
        return self._conn

    def _lost(self, e: Exception) -> None:
        log.warning("gates: database session lost (%s); its slots are free", type(e).__name__)
        self._end_session()

    def take_any(self, prefix: str, size: int, owner: object, reserve: int = 0) -> str | None:
        key = group_key(prefix)
        with self._lock:
            try:
                conn = self._session()
                mine = self._mine(prefix)
                row = conn.execute(_TAKE, (size, mine, key)).fetchone()
                if row is None:
                    return None
                if reserve:
                    probe = conn.execute(_TAKE, (size, [*mine, row[0]], key)).fetchone()
                    if probe is not None:
                        conn.execute("select pg_advisory_unlock(%s, %s)", (key, probe[0]))
                    else:
                        conn.execute("select pg_advisory_unlock(%s, %s)", (key, row[0]))
                        return None
            except psycopg.Error as e:
                self._lost(e)
                raise GatesUnreachable(UNREACHABLE) from None
            name = f"{prefix}.{row[0]}"
            self._held[name] = owner
            return name

    def _mine(self, prefix: str) -> list[int]:
        return [int(n.rsplit(".", 1)[1]) for n in self._held if n.rsplit(".", 1)[0] == prefix]

    def try_take(self, name: str, owner: object) -> bool:
        prefix, n = name.rsplit(".", 1)
        with self._lock:
            if name in self._held:
                return False
            try:
                got = (
                    self._session()
                    .execute("select pg_try_advisory_lock(%s, %s)", (group_key(prefix), int(n)))
                    .fetchone()[0]
                )
            except psycopg.Error as e:
                self._lost(e)
                raise GatesUnreachable(UNREACHABLE) from None
            if got:
                self._held[name] = owner
            return bool(got)

    def give_back(self, name: str, owner: object) -> None:
        prefix, n = name.rsplit(".", 1)
        with self._lock:
            if self._pid != os.getpid() or self._held.get(name) is not owner:
                return
            del self._held[name]
            try:
                self._session().execute(
                    "select pg_advisory_unlock(%s, %s)", (group_key(prefix), int(n))
                )
            except psycopg.Error as e:
                self._lost(e)

    def held(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._held) if self._pid == os.getpid() else frozenset()

    def close(self) -> None:
        """End the session, which frees every slot this process holds."""
        with self._lock:
            self._end_session()

    def _end_session(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None
        self._held.clear()
