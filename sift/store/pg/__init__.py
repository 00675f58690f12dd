"""The PostgreSQL engine: the same `Store` surface, for several boxes on one database.

`open_pg_store(cfg)` returns a `PgStore` whose `batch`, `worker` and `politeness` parts and
metric series live in PostgreSQL, while the content and digest caches stay in this box's own
SQLite file (docs/OPERATIONS.md §Running on several boxes says why).
Wake-ups come from LISTEN/NOTIFY (`notify.Listener`): `on_work` wakes a worker on every box,
and `subscribe` hands the API's waiter and the worker's webhook sender the job id of each
change, so they wake what it concerns without polling (docs/ARCHITECTURE.md §Wake-ups).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from sift.config import Config
from sift.store.cache import ContentCache, DigestCache
from sift.store.db import Database
from sift.store.pg import batch_sql, counters
from sift.store.pg.batch import PgBatchStore
from sift.store.pg.db import PgDatabase
from sift.store.pg.events import PgEventLog
from sift.store.pg.notify import EVENTS, HOOKS, JOBS, WORK, Listener
from sift.store.pg.politeness import PgPoliteness
from sift.store.pg.waits import PgWaits
from sift.store.pg.webhooks import PgWebhooks
from sift.store.pg.workers import PgWorkerState, new_worker_id
from sift.store.records import BatchSeries

# What a waiter may subscribe to: a job ended (or was cancelled), its event log grew, a webhook
# delivery was queued.
TOPICS = {"ends": JOBS, "events": EVENTS, "hooks": HOOKS}


class PgStore:
    engine = "postgres"

    def __init__(self, db: PgDatabase, local: Database, cfg: Config):
        self._db = db
        self._local = local
        self.worker_id = new_worker_id()
        dead_after = cfg.store.worker_dead_after
        self.batch = PgBatchStore(db, worker=self.worker_id, dead_after=dead_after)
        self.events = PgEventLog(db)
        self.webhooks = PgWebhooks(db)
        self.cache = ContentCache(local, ttl=cfg.cache.ttl, max_bytes=cfg.cache.max_bytes)
        self.digests = DigestCache(local)
        self.worker = PgWorkerState(db, self.worker_id, self.batch, dead_after=dead_after)
        self.politeness = PgPoliteness(db)
        self.waits = PgWaits(db)
        self._listener = Listener(db.dsn)

    async def batch_series(self) -> BatchSeries:
        async def read(c) -> BatchSeries:
            depth, inflight = await batch_sql.gauges(c)
            return BatchSeries(await counters.read_all(c), depth, inflight)

        return await self._db.transaction(read)

    async def data_version(self) -> int:
        """The number of job notifications this process has received (and reconnects)."""
        await self._listener.start()
        return self._listener.version

    async def on_work(self, wake: Callable[[], None]) -> bool:
        """Call `wake()` whenever a job is submitted or cancelled on any box."""
        self._listener.on(WORK, lambda _payload: wake())
        await self._listener.start()
        return True

    async def subscribe(self, topic: str, wake: Callable[[str], None]) -> bool:
        """Call `wake(job_id)` on every notification of `topic` (`TOPICS`); `wake(ANY)` after
        the listening connection was lost, when any job may have changed."""
        self._listener.on(TOPICS[topic], wake)
        await self._listener.start()
        return True

    async def checkpoint(self) -> None:
        await asyncio.to_thread(self._local.checkpoint)

    @property
    def path(self) -> Path:
        """This box's cache file."""
        return self._local.path

    def close(self) -> None:
        self._local.close()

    async def aclose(self) -> None:
        await self._listener.close()
        await self._db.close()
        self.close()


def open_pg_store(cfg: Config) -> PgStore:
    db = PgDatabase(cfg.store.dsn, busy_timeout=cfg.store.busy_timeout)
    local = Database(cfg.db_path, busy_timeout=cfg.store.busy_timeout)
    return PgStore(db, local, cfg)
