"""The shared SQLite file: connections, pragmas, migrations and the one write helper.

Both processes open their own connections to `state_dir/sift.db` in WAL mode. Every write goes
through `Database.write`, which opens `BEGIN IMMEDIATE` so the write lock is taken up front and
waits in SQLite's busy handler instead of failing on a lock upgrade. Reads use a separate
connection so a write waiting for another process's lock never delays them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import apsw

from sift.store.errors import StoreBusy, StoreError
from sift.store.schema import MIGRATIONS

log = logging.getLogger("sift.store")
T = TypeVar("T")


class _WouldBlock(Exception):
    """An inline try found a lock taken right now, so the call goes to its thread."""


def _connect(path: Path, busy_ms: int) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.setbusytimeout(busy_ms)
    _enter_wal(conn, busy_ms)
    cur = conn.cursor()
    cur.execute("pragma synchronous=normal")
    cur.execute("pragma foreign_keys=on")
    cur.execute(f"pragma wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
    return conn


def _enter_wal(conn: apsw.Connection, busy_ms: int) -> None:
    """Switch to WAL, retrying within the busy timeout.

    When two processes open a fresh file at once, `journal_mode=wal` can answer SQLITE_BUSY
    without calling the busy handler, so the API and the worker starting together would fail.
    """
    deadline = time.monotonic() + busy_ms / 1000
    while True:
        try:
            conn.cursor().execute("pragma journal_mode=wal").fetchall()
            return
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


# Pages of WAL before a commit checkpoints by itself. Larger than SQLite's 1000, so a commit on
# the batch path (results are tens of KB) rarely pays for a checkpoint and its fsync; the
# worker checkpoints on a connection and thread of their own on every heartbeat instead
# (`checkpoint`).
WAL_AUTOCHECKPOINT = 10_000


class Database:
    """Two connections to one file: `reader` for reads, `writer` for the write helper."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 10.0):
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        busy_ms = int(busy_timeout * 1000)
        try:
            self.writer = _connect(self.path, busy_ms)
            self._migrate()
            self.reader = _connect(self.path, busy_ms)
        except apsw.Error as e:
            raise StoreError(f"database {self.path}: {e}") from None
        self._write_lock = threading.Lock()
        self._queued = threading.local()  # .deadline of the call `run` queued
        self._read_lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._checkpointer: apsw.Connection | None = None
        self._read_pool = ThreadPoolExecutor(1, thread_name_prefix="sift-db-read")
        self._write_pool = ThreadPoolExecutor(1, thread_name_prefix="sift-db-write")
        self._watched: dict[str, list[Callable[[], None]]] = {}  # table -> after its inserts
        self._inserted: set[str] = set()  # watched tables the open write inserted into
        self.writer.set_update_hook(self._row_changed)

    def _migrate(self) -> None:
        """Apply the pending migrations, each in its own transaction; one log line for the run,
        naming the file (on PostgreSQL this is the box's cache file, beside the shared schema)."""
        cur = self.writer.cursor()
        before = None
        for version, statements in enumerate(MIGRATIONS, start=1):
            with self._immediate(cur):
                current = cur.execute("pragma user_version").fetchone()[0]
                if current >= version:
                    continue
                before = current if before is None else before
                for sql in statements:
                    cur.execute(sql)
                cur.execute(f"pragma user_version={version}")
        if before is not None:
            log.info(
                "store: %s migrated from schema version %d to %d",
                self.path,
                before,
                len(MIGRATIONS),
            )

    @staticmethod
    @contextlib.contextmanager
    def _immediate(cur: apsw.Cursor) -> Iterator[apsw.Cursor]:
        cur.execute("begin immediate")
        with Database._committed(cur):
            yield cur

    @staticmethod
    @contextlib.contextmanager
    def _committed(cur: apsw.Cursor) -> Iterator[apsw.Cursor]:
        """Commit the open transaction, or roll it back if the block raises."""
        try:
            yield cur
        except BaseException:
            cur.execute("rollback")
            raise
        else:
            cur.execute("commit")

    def write(self, fn: Callable[[apsw.Cursor], T]) -> T:
        """Run `fn(cursor)` inside BEGIN IMMEDIATE … COMMIT (rolled back if it raises), here.

        The busy timeout counts from when the write was asked for, not from its turn on the
        writer thread: writes queued behind one that waits for another process's lock give up
        with it instead of each waiting a full timeout in turn.
        """
        deadline = getattr(self._queued, "deadline", None) or time.monotonic() + self.busy_timeout
        with self._write_lock:
            left = max(0.0, deadline - time.monotonic())
            self.writer.setbusytimeout(int(left * 1000))
            cur = self.writer.cursor()
            self._inserted.clear()
            try:
                with self._immediate(cur):
                    result = fn(cur)
            except apsw.BusyError:
                raise StoreBusy() from None
            self._after_commit()
            return result

    def watch_inserts(self, table: str, wake: Callable[[], None]) -> None:
        """Call `wake()` after each commit of this object's writes that inserted a row into
        `table` (a rowid table), on the thread that committed, with the write lock still
        held: `wake` must only hand the news on. Another process's commits are not seen
        here (they move `data_version`)."""
        self._watched.setdefault(table, []).append(wake)

    def _row_changed(self, op: int, _db: str, table: str, _rowid: int) -> None:
        if op == apsw.SQLITE_INSERT and table in self._watched:
            self._inserted.add(table)

    def _after_commit(self) -> None:
        """The write has committed: a failing `wake` is logged, never the write's error."""
        for table in self._inserted:
            for wake in self._watched[table]:
                try:
                    wake()
                except Exception as e:  # a closed event loop at shutdown
                    log.debug("store: a commit's wake-up failed (%s)", type(e).__name__)
        self._inserted.clear()

    def read(self, fn: Callable[[apsw.Cursor], T]) -> T:
        """Run `fn(cursor)` in one read transaction, a consistent snapshot, here."""
        with self._read_lock:
            return self._read_on(self.reader.cursor(), fn, StoreBusy)

    @staticmethod
    def _read_on(cur: apsw.Cursor, fn: Callable[[apsw.Cursor], T], busy: type[Exception]) -> T:
        cur.execute("begin")
        try:
            return fn(cur)
        except apsw.BusyError:
            raise busy() from None
        finally:
            cur.execute("commit")

    def checkpoint(self) -> None:
        """A passive WAL checkpoint: it never blocks a writer, and on a connection of its own
        (opened on first use) it never holds up a read either; it takes milliseconds (copying
        pages, an fsync)."""
        with self._checkpoint_lock:
            if self._checkpointer is None:
                self._checkpointer = _connect(self.path, int(self.busy_timeout * 1000))
            self._checkpointer.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)

    # -- the store operations' threads: each takes one transaction, `fn(cursor)` ------------

    def on_writer(self, fn: Callable[[apsw.Cursor], T]) -> asyncio.Future[T]:
        """`write(fn)` on the writer thread; its writes wait for a lock at most the busy
        timeout from now, queueing included.

        Not a coroutine: the call is queued at once, so work started before a long step on
        the event loop (a render) proceeds during it; await the future for the result.
        """
        deadline = time.monotonic() + self.busy_timeout
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._write_pool, self._queued_write, deadline, fn)

    def _queued_write(self, deadline: float, fn: Callable[[apsw.Cursor], T]) -> T:
        self._queued.deadline = deadline
        try:
            return self.write(fn)
        finally:
            self._queued.deadline = None

    async def on_reader(self, fn: Callable[[apsw.Cursor], T]) -> T:
        """`read(fn)` on the reader thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._read_pool, self.read, fn)

    async def write_now(self, fn: Callable[[apsw.Cursor], T]) -> T:
        """`write(fn)` right here when the database is free this instant, else `on_writer`.

        A thread hop costs about as much as a small transaction (~0.1 ms each way), and the
        worker pays several per target. Here the transaction runs on the calling thread with
        no waiting at all: the locks are tried, never waited for (busy timeout 0), so the
        event loop cannot stall on another process's lock; when a lock is taken it goes to
        the writer thread as usual. `fn` is one transaction, so a try that found the lock
        taken has written nothing.
        """
        try:
            return self._write_inline(fn)
        except _WouldBlock:
            return await self.on_writer(fn)

    def _write_inline(self, fn: Callable[[apsw.Cursor], T]) -> T:
        if not self._write_lock.acquire(blocking=False):
            raise _WouldBlock
        try:
            self.writer.setbusytimeout(0)
            cur = self.writer.cursor()
            try:
                cur.execute("begin immediate")
            except apsw.BusyError:
                raise _WouldBlock from None
            self._inserted.clear()
            with self._committed(cur):
                result = fn(cur)
            self._after_commit()
            return result
        except apsw.BusyError:
            raise StoreBusy() from None
        finally:
            self._write_lock.release()

    async def read_now(self, fn: Callable[[apsw.Cursor], T]) -> T:
        """`read(fn)` right here when the reader is free this instant, else `on_reader`."""
        try:
            return self._read_inline(fn)
        except _WouldBlock:
            return await self.on_reader(fn)

    def _read_inline(self, fn: Callable[[apsw.Cursor], T]) -> T:
        if not self._read_lock.acquire(blocking=False):
            raise _WouldBlock
        try:
            self.reader.setbusytimeout(0)
            return self._read_on(self.reader.cursor(), fn, _WouldBlock)
        finally:
            self.reader.setbusytimeout(int(self.busy_timeout * 1000))
            self._read_lock.release()

    def close(self) -> None:
        self._read_pool.shutdown(wait=True)
        self._write_pool.shutdown(wait=True)
        with self._checkpoint_lock:
            conns = [self.reader, self.writer, self._checkpointer]
            self._checkpointer = None
        for conn in conns:
            if conn is not None:
                with contextlib.suppress(apsw.Error):
                    conn.close()
