"""The PostgreSQL engine's connections: one pool per process, migrations, the transaction helper.

psycopg 3 with psycopg_pool (docs/ARCHITECTURE.md §Two engines says why). Every operation is one
`transaction(fn)`: a pooled connection, BEGIN … COMMIT around `fn(conn)`, rolled back if it
raises. The driver is async, so an operation waits on the event loop without a thread; a lost
server or an exhausted pool surfaces as `StoreBusy` (503 "try again later"), never a hang: the
pool wait and every statement are bounded by `[store] busy_timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import psycopg_pool

from sift.store.errors import StoreBusy, StoreError
from sift.store.pg.schema import MIGRATIONS

log = logging.getLogger("sift.store")
T = TypeVar("T")

# Transaction-level advisory lock keys of this engine (one namespace, see sift/gates/pg_slots.py
# for the gates' keys, 0x5_1F7_0003 included): migrations, and submits (the caps count live
# jobs across every box).
MIGRATE_LOCK = 0x5_1F7_0001
SUBMIT_LOCK = 0x5_1F7_0002

Conn = psycopg.AsyncConnection


def migrate(dsn: str, *, timeout: float = 10.0) -> int:
    """Apply the migrations not applied yet; the schema version after. Blocking (startup)."""
    try:
        with psycopg.connect(dsn, connect_timeout=max(1, int(timeout))) as conn:
            before = None
            for version, statements in enumerate(MIGRATIONS, start=1):
                with conn.transaction():
                    # The lock first: two boxes creating the version table at once could
                    # otherwise collide in the catalog even with IF NOT EXISTS.
                    conn.execute("select pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
                    conn.execute("create table if not exists sift_schema(version integer not null)")
                    row = conn.execute("select max(version) from sift_schema").fetchone()
                    if (row[0] or 0) >= version:
                        continue
                    before = (row[0] or 0) if before is None else before
                    for sql in statements:
                        conn.execute(sql)
                    conn.execute("insert into sift_schema(version) values (%s)", (version,))
            if before is not None:  # one line for the run (docs/OPERATIONS.md §Upgrades)
                log.info(
                    "store: postgres schema migrated from version %d to %d", before, len(MIGRATIONS)
                )
            return len(MIGRATIONS)
    except psycopg.Error as e:
        raise StoreError(f"database {redact(dsn)}: {e}") from None


def redact(dsn: str) -> str:
    """The DSN for messages and logs: any password left out."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(unparsable dsn)"
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo(**info)


class PgDatabase:
    """A connection pool to one database, opened on first use (it needs the event loop)."""

    def __init__(self, dsn: str, *, busy_timeout: float = 10.0, max_size: int = 10):
        self.dsn = dsn
        self.busy_timeout = busy_timeout
        migrate(dsn, timeout=busy_timeout)
        ms = int(busy_timeout * 1000)
        self.pool = psycopg_pool.AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=max_size,
            timeout=busy_timeout,
            kwargs={"autocommit": True, "options": f"-c statement_timeout={ms}"},
            open=False,
        )
        self._opened: asyncio.Future | None = None

    async def _open(self) -> None:
        if self._opened is None:
            self._opened = asyncio.ensure_future(self.pool.open(wait=False))
        await asyncio.shield(self._opened)

    async def transaction(self, fn: Callable[[Conn], Awaitable[T]], *, pipelined=False) -> T:
        """Run `fn(conn)` in one transaction on a pooled connection.

        `pipelined`: in libpq's pipeline mode, where a statement whose result `fn` does not
        read goes out with the next one whose result it reads (BEGIN with the first, an
        insert with the following read, COMMIT alone at the end): fewer round trips for the
        same statements, in the same order, in the same transaction. An error surfaces at
        the next read or at COMMIT and rolls the whole transaction back, as ever."""
        await self._open()
        try:
            async with self.pool.connection() as conn:
                return await run_transaction(conn, fn, pipelined=pipelined)
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as e:
            raise StoreBusy(f"database unavailable: {type(e).__name__}") from None
        except psycopg.errors.DeadlockDetected:
            raise StoreBusy("database deadlock; try again") from None

    async def statement(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        """Run `fn(conn)` without BEGIN/COMMIT, for operations of one statement (which
        PostgreSQL runs atomically, on one snapshot, anyway): one round trip instead of three.
        A second statement raises `OneStatementOnly`: it would read another snapshot."""
        await self._open()
        try:
            async with self.pool.connection() as conn:
                return await fn(_OneStatement(conn))
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as e:
            raise StoreBusy(f"database unavailable: {type(e).__name__}") from None

    async def close(self) -> None:
        if self._opened is not None:
            with contextlib.suppress(Exception):
                await self.pool.close()


class AfterCommit:
    """What a transaction's `fn` returns when it reads its answers only after COMMIT, so that
    a pipelined transaction sends BEGIN, its statements and COMMIT together and waits for the
    server once (docs/WORKER.md §The store's transactions). `read()` gives the result, or
    `Again(fn)`: a second transaction to run on the same connection first."""

    def __init__(self, read: Callable[[], Awaitable[Any]]):
        self.read = read


class Again:
    """A follow-up transaction `AfterCommit.read` asks for; its result is the result."""

    def __init__(self, fn: Callable[[Conn], Awaitable[Any]]):
        self.fn = fn


async def run_transaction(conn: Conn, fn: Callable[[Conn], Awaitable[T]], *, pipelined=False) -> T:
    """`fn(conn)` in one transaction (pipelined or not), its `AfterCommit` answer read after
    COMMIT, and any follow-up transaction it asks for run the same way."""
    while True:
        if pipelined:
            result = await _pipelined(conn, fn)
        else:
            async with conn.transaction():
                result = await fn(conn)
        while isinstance(result, AfterCommit):
            result = await result.read()
        if not isinstance(result, Again):
            return result
        fn = result.fn


async def _pipelined(conn: Conn, fn: Callable[[Conn], Awaitable[T]]) -> T:
    """BEGIN … COMMIT written as statements, so the pipeline sends BEGIN with `fn`'s first
    statement and waits once for COMMIT (psycopg's `transaction()` syncs at either end)."""
    try:
        async with conn.pipeline():  # its end syncs: COMMIT's answer is read there
            await conn.execute("begin")
            result = await fn(conn)
            await conn.execute("commit")
        return result
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                await conn.execute("rollback")


class OneStatementOnly(RuntimeError):
    """`PgDatabase.statement` was asked for a second statement; use `transaction`."""


class _OneStatement:
    """A connection that runs one statement, so `statement` keeps its promise."""

    def __init__(self, conn: Conn):
        self._conn = conn
        self._used = False

    async def execute(self, sql: str, args: Any = ()):
        if self._used:
            raise OneStatementOnly(sql[:60])
        self._used = True
        return await self._conn.execute(sql, args)


async def one(conn: Conn, sql: str, args: Any = ()) -> tuple | None:
    cur = await conn.execute(sql, args)
    return await cur.fetchone()


async def rows(conn: Conn, sql: str, args: Any = ()) -> list[tuple]:
    cur = await conn.execute(sql, args)
    return await cur.fetchall()


async def changed(conn: Conn, sql: str, args: Any = ()) -> int:
    cur = await conn.execute(sql, args)
    return cur.rowcount
