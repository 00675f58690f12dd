"""Synchronous reads of a store's database file, for assertions.

Each call opens a connection of its own (WAL: it sees every committed write) and uses the
store's own named queries, so a test asserts on the rows production wrote without going
through the operations it tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import apsw

from sift.store import Store, batch_sql, counters
from sift.store.records import Heartbeat, Job, TargetRow

T = TypeVar("T")


@contextlib.contextmanager
def snapshot(conn: apsw.Connection) -> Iterator[apsw.Cursor]:
    """One read transaction on `conn`: every read inside sees the same committed state."""
    cur = conn.cursor()
    cur.execute("begin")
    try:
        yield cur
    finally:
        cur.execute("commit")


class DbView:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[apsw.Cursor]:
        conn = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
        conn.setbusytimeout(10_000)
        try:
            with snapshot(conn) as cur:
                yield cur
        finally:
            conn.close()

    def read(self, fn: Callable[[apsw.Cursor], T]) -> T:
        with self._cursor() as cur:
            return fn(cur)

    def all(self, sql: str, args: tuple = ()) -> list[tuple[Any, ...]]:
        return self.read(lambda c: c.execute(sql, args).fetchall())

    def one(self, sql: str, args: tuple = ()) -> Any:
        return self.read(lambda c: c.execute(sql, args).fetchone()[0])

    def job(self, job_id: str) -> Job | None:
        return self.read(lambda c: batch_sql.get_job(c, job_id))

    def targets(self, job_id: str, *, results: bool = True) -> list[TargetRow]:
        return self.read(lambda c: batch_sql.get_targets(c, job_id, results=results))

    def status(self, job_id: str) -> tuple[Job, list[TargetRow]] | None:
        return self.read(lambda c: batch_sql.status(c, job_id, True))

    def counters(self) -> dict[tuple[str, str], float]:
        return self.read(counters.read_all)

    def heartbeat(self) -> Heartbeat | None:
        row = self.read(
            lambda c: c.execute("select pid, started_at, heartbeat from worker_state").fetchone()
        )
        return Heartbeat(*row) if row else None

    def gauges(self) -> tuple[int, int]:
        return self.read(batch_sql.gauges)

    def cache_bytes(self) -> int:
        return self.one("select coalesce(sum(nbytes), 0) from content_cache")

    def batch_nbytes(self) -> int:
        return self.one("select coalesce(sum(nbytes), 0) from batch_job")


def view(store: Store) -> DbView:
    return DbView(store.path)
