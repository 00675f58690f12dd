"""The shared database: only this package speaks SQL.

`open_store(cfg)` opens `state_dir/sift.db` and returns a `Store`, whose parts hold every
operation production performs: `batch` (jobs and targets), `events` (each job's event log),
`webhooks` (the delivery outbox), `cache` (raw responses), `digests` (answers), `worker`
(heartbeat), `politeness` (robots.txt verdicts and each host's not-before time), plus the
`/metrics` snapshot, the change counter the long-poll waiter watches and the WAL checkpoint.
Every operation is awaitable and picks its own thread; callers never see a connection. The
operations are declared in `surface`, the rules both engines keep in `rules`
(docs/ARCHITECTURE.md §The store's surface).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import apsw
import psycopg

from sift.config import Config
from sift.store import batch_sql, counters
from sift.store.batch import BatchStore
from sift.store.cache import ContentCache, DigestCache
from sift.store.db import Database
from sift.store.errors import StoreBusy, StoreError
from sift.store.event_rules import EventRow
from sift.store.events import EventLog
from sift.store.politeness import Politeness
from sift.store.records import (
    BatchSeries,
    CachedResponse,
    Claim,
    Finished,
    Heartbeat,
    Job,
    JobSummary,
    ListPosition,
    NewTarget,
    ResultPage,
    RobotsEntry,
    SubmitOutcome,
    TargetRow,
)
from sift.store.waits import Waits
from sift.store.webhooks import Webhooks
from sift.store.worker_state import WorkerState

# Everything a store call may raise: library code logs these and goes on
# (docs/WORKER.md §Store errors).
STORE_ERRORS = (apsw.Error, psycopg.Error, StoreBusy, StoreError)

__all__ = [
    "STORE_ERRORS",
    "BatchSeries",
    "CachedResponse",
    "Claim",
    "EventRow",
    "Finished",
    "Heartbeat",
    "Job",
    "JobSummary",
    "ListPosition",
    "NewTarget",
    "Politeness",
    "ResultPage",
    "RobotsEntry",
    "Store",
    "StoreBusy",
    "StoreError",
    "SubmitOutcome",
    "TargetRow",
    "open_store",
    "state_dir_problem",
]


class Store:
    """One database, its operations grouped by table; `cfg` gives the cache bounds."""

    engine = "sqlite"

    def __init__(self, db: Database, cfg: Config | None = None):
        cfg = cfg or Config()
        self._db = db
        self.batch = BatchStore(db)
        self.events = EventLog(db)
        self.webhooks = Webhooks(db)
        self.cache = ContentCache(db, ttl=cfg.cache.ttl, max_bytes=cfg.cache.max_bytes)
        self.digests = DigestCache(db)
        self.worker = WorkerState(db, dead_after=cfg.store.worker_dead_after)
        self.politeness = Politeness(db)
        self.waits = Waits(db)

    async def batch_series(self) -> BatchSeries:
        """The batch counters and gauges for one `/metrics` scrape, from one snapshot."""

        def read(c: apsw.Cursor) -> BatchSeries:
            depth, inflight = batch_sql.gauges(c)
            return BatchSeries(counters.read_all(c), depth, inflight)

        return await self._db.on_reader(read)

    async def data_version(self) -> int:
        """A number that changes whenever another connection commits (`PRAGMA data_version`
        on the reader connection): the long-poll waiter reads job statuses only then."""
        return await self._db.on_reader(lambda c: c.execute("pragma data_version").fetchone()[0])

    async def checkpoint(self) -> None:
        """A passive WAL checkpoint on a thread and connection of its own (the worker's
        heartbeat runs it, so commits on the batch path seldom have to)."""
        await asyncio.to_thread(self._db.checkpoint)

    @property
    def path(self) -> Path:
        """The database file (for `sift backup` and for tests that inspect it)."""
        return self._db.path

    async def on_work(self, wake) -> bool:
        """The PostgreSQL engine wakes workers through the database; here the API's datagram
        nudge (`sift.nudge`) does, so this returns False and never calls `wake`."""
        return False

    async def subscribe(self, topic: str, wake) -> bool:
        """The PostgreSQL engine pushes job changes on any box (docs/ARCHITECTURE.md
        §Wake-ups). Here only `"hooks"` is pushed, and only for this process's own commits
        that queue a delivery (the worker's: its sender needs no tick; the API's cancel and
        redeliver reach it by the datagram nudge): True, calling `wake("")` on the event loop
        after each such commit. Waiters on `"ends"` and `"events"` watch `data_version`
        (False, `wake` never called)."""
        if topic != "hooks":
            return False
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()

        def committed() -> None:  # on the committing thread, the write lock held
            if threading.get_ident() == loop_thread:
                wake("")
            else:
                loop.call_soon_threadsafe(wake, "")

        self._db.watch_inserts("webhook_outbox", committed)
        return True

    def close(self) -> None:
        self._db.close()

    async def aclose(self) -> None:
        self.close()


def state_dir_problem(state_dir: Path) -> str | None:
    """Why a process cannot use `state_dir`, or None: the one check `sift serve`, `sift up`
    and `sift-worker` make before they start."""
    if state_dir.exists() and not state_dir.is_dir():
        return f"state dir {state_dir} is not a directory (set [store] state_dir)"
    if not state_dir.is_dir():
        return f"state dir {state_dir} does not exist (create it, or set [store] state_dir)"
    if not os.access(state_dir, os.W_OK | os.X_OK):
        return f"state dir {state_dir} is not writable by this user"
    return None


def open_store(cfg: Config) -> Store:
    """Open (and migrate) the configured engine's database: the SQLite file under the state
    dir, or PostgreSQL (`[store] engine = "postgres"`) with this box's cache file beside it."""
    problem = state_dir_problem(Path(cfg.store.state_dir))
    if problem:
        raise StoreError(problem)
    if cfg.store.engine == "postgres":
        from sift.store.pg import open_pg_store

        return open_pg_store(cfg)
    db = Database(cfg.db_path, busy_timeout=cfg.store.busy_timeout)
    return Store(db, cfg)
