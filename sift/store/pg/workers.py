"""Worker heartbeats on PostgreSQL: any number of workers on any boxes, each beating.

Each worker process has an id (box, pid and a random part, so a restarted process is a new
worker) and a row in `worker_beat` whose heartbeat it writes every few seconds, timed by the
database's clock. A worker silent for `[store] worker_dead_after` is dead: the targets it had
in flight fail (`PgBatchStore.reap`, run by every live worker on every beat) and its row is
deleted. The API's /healthz reports the newest heartbeat of any worker.
"""

from __future__ import annotations

import os
import socket
import uuid

from sift.store.pg import batch_sql as sql
from sift.store.pg.batch import PgBatchStore
from sift.store.pg.db import PgDatabase
from sift.store.records import Heartbeat


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PgWorkerState:
    def __init__(
        self,
        db: PgDatabase,
        worker: str,
        batch: PgBatchStore | None = None,
        *,
        dead_after: float = 15.0,
    ):
        self._db = db
        self.worker = worker
        self._batch = batch
        self.dead_after = dead_after

    async def beat(self, pid: int, started_at: float, now: float) -> None:
        """Beat (by the database's clock: `now` only dates what a reap fails), then fail the
        targets of silent workers (every live worker does, so a dead worker's targets fail
        within one beat of `dead_after`)."""
        host = socket.gethostname()
        await self._db.transaction(lambda c: sql.beat(c, self.worker, host, pid, started_at))
        if self._batch is not None:
            await self._batch.reap(now)

    async def clear(self, pid: int) -> None:
        """A clean exit: leave, so the targets this worker could not store fail at once."""
        await self._db.transaction(lambda c: sql.leave(c, self.worker))

    async def get(self, now: float) -> Heartbeat | None:
        """The newest heartbeat of any worker, its time told on the caller's clock."""
        row = await self._db.transaction(lambda c: sql.newest_beat(c, now))
        return Heartbeat(*row) if row else None

    async def live(self, now: float) -> int:
        """Workers whose heartbeat is younger than `dead_after` by the database's clock, on
        every box (`now` changes nothing here)."""
        return await self._db.statement(lambda c: sql.live_workers(c, self.dead_after))
