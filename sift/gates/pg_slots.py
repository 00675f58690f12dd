"""Slots as PostgreSQL advisory locks: the gates' primitive when several boxes share one
database (engine postgres; docs/GATES.md §Across boxes).

A slot is the session-level advisory lock `(group key, n)`: holding it means this process's
gate session holds that lock. The server drops a session's advisory locks when the session
ends, however it ends (the process exits or is killed, its box loses the connection and the
server's TCP keepalive gives up), which is the same "freed by the kernel" property the lock
files have on one box; no lease or stale-lock sweep is needed.

Like `flock` on one fd, an advisory lock is re-entrant within its session, so the table also
records which slots this process holds and for which permit (the same rules as `SlotTable`).
An acquire is one round trip: a function in the session's temporary schema walks each group's
`n = 0, 1, …`, stops at the first lock it gets, probes for a batch take's spare slot, and gives
back what it took when a group is full; a release is one statement too. A lost connection frees
every slot this process held; the table forgets them (their permits' releases become no-ops),
reconnects on the next take, and answers "no slot" while the database is unreachable, which
only ever errs on the side of fewer fetches.
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

# An acquire's three groups in one round trip: each group's first free slot in order (none this
# session holds), a batch take's probe for a spare one, and all or nothing; made in the
# session's own temporary schema when the session opens (no migration; PostgreSQL grants TEMP
# to every role by default). Returns the slot numbers, or [-i] when group i (1-based) is full,
# holding nothing.
_TAKE_ALL_FN = """
create or replace function pg_temp.sift_gates_take(
  keys int[], sizes int[], reserves int[], mine int8[]) returns int[]
language plpgsql as $$
declare
  got int[] := '{}';
  found int;
  spare boolean;
begin
  for i in 1 .. array_length(keys, 1) loop
    found := null;
    for n in 0 .. sizes[i] - 1 loop
      continue when keys[i]::int8 * 4294967296 + n = any(mine);
      if pg_try_advisory_lock(keys[i], n) then
        found := n;
        exit;
      end if;
    end loop;
    if found is not null and reserves[i] > 0 then
      spare := false;
      for m in found + 1 .. sizes[i] - 1 loop
        continue when keys[i]::int8 * 4294967296 + m = any(mine);
        if pg_try_advisory_lock(keys[i], m) then
          perform pg_advisory_unlock(keys[i], m);
          spare := true;
          exit;
        end if;
      end loop;
      if not spare then
        perform pg_advisory_unlock(keys[i], found);
        found := null;
      end if;
    end if;
    if found is null then
      for j in 1 .. coalesce(array_length(got, 1), 0) loop
        perform pg_advisory_unlock(keys[j], got[j]);
      end loop;
      return array[-i];
    end if;
    got := array_append(got, found);
  end loop;
  return got;
end $$
"""
_TAKE_ALL = "select pg_temp.sift_gates_take(%s, %s, %s, %s)"
_GIVE_BACK_ALL = (
    "select count(pg_advisory_unlock(k, n)) from unnest(%s::int[], %s::int[]) as s(k, n)"
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
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5, **KEEPALIVE)
            conn.execute(_TAKE_ALL_FN)
            self._conn = conn
        return self._conn

    def _lost(self, e: Exception) -> None:
        log.warning("gates: database session lost (%s); its slots are free", type(e).__name__)
        self._end_session()

    def take_all(
        self, groups: list[tuple[str, int, int]], owner: object
    ) -> tuple[list[str], int | None]:
        """One slot of each `(prefix, size, reserve)` group in one round trip, all or nothing:
        the names taken, or ([], the index of the first full group)."""
        keys = [group_key(prefix) for prefix, _, _ in groups]
        with self._lock:
            try:
                conn = self._session()
                mine = [  # each held slot as key * 2^32 + n, the function's test for "ours"
                    group_key(p) * 2**32 + int(n) for p, n in (h.rsplit(".", 1) for h in self._held)
                ]
                args = (
                    keys,
                    [size for _, size, _ in groups],
                    [reserve for _, _, reserve in groups],
                    mine,
                )
                got = conn.execute(_TAKE_ALL, args).fetchone()[0]
            except psycopg.Error as e:
                self._lost(e)
                raise GatesUnreachable(UNREACHABLE) from None
            if len(got) == 1 and got[0] < 0:
                return [], -got[0] - 1
            names = [f"{prefix}.{n}" for (prefix, _, _), n in zip(groups, got, strict=True)]
            for name in names:
                self._held[name] = owner
            return names, None

    def give_back_all(self, names: list[str], owner: object) -> None:
        """`give_back` of each of `names` in one round trip."""
        with self._lock:
            if self._pid != os.getpid():
                return
            mine = [n for n in names if self._held.get(n) is owner]
            if not mine:
                return
            for name in mine:
                del self._held[name]
            pairs = [name.rsplit(".", 1) for name in mine]
            try:
                self._session().execute(
                    _GIVE_BACK_ALL, ([group_key(p) for p, _ in pairs], [int(n) for _, n in pairs])
                )
            except psycopg.Error as e:
                self._lost(e)

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
