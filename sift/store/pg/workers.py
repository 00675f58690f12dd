"""Worker leases on PostgreSQL: any number of workers on any boxes, each with a heartbeat.

Each worker process has an id (box, pid and a random part, so a restarted process is a new
worker) and a row in `worker_lease` whose heartbeat it writes every few seconds. A worker whose
heartbeat is older than `[store] worker_lease` is dead: the targets it had in flight fail
(`PgBatchStore.reap`, run by every live worker on every beat) and its row is deleted. The API's
/healthz reports the newest heartbeat of any worker.
"""

from __future__ import annotations

import os
import socket
import uuid

from sift.constants import HEARTBEAT_STALE
from sift.store.pg import batch_sql as sql
from sift.store.pg.batch import PgBatchStore
from sift.store.pg.db import PgDatabase
from sift.store.records import Heartbeat


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PgWorkerState:
    def __init__(self, db: PgDatabase, worker: str, batch: PgBatchStore | None = None):
        self._db = db
        self.worker = worker
        self._batch = batch

    async def beat(self, pid: int, started_at: float, now: float) -> None:
        """Renew this worker's lease, then fail the targets of workers whose lease expired
        (every live worker does, so a dead worker's targets fail within one beat of expiry)."""
        host = socket.gethostname()
        await self._db.transaction(lambda c: sql.beat(c, self.worker, host, pid, started_at, now))
        if self._batch is not None:
            await self._batch.reap(now)

    async def clear(self, pid: int) -> None:
        """A clean exit: leave, so the targets this worker could not store fail at once."""
        await self._db.transaction(lambda c: sql.leave(c, self.worker))

    async def get(self) -> Heartbeat | None:
        row = await self._db.transaction(sql.newest_beat)
        return Heartbeat(*row) if row else None

    async def live(self, now: float) -> int:
        """Workers whose heartbeat is under HEARTBEAT_STALE old, on every box."""
        return await self._db.transaction(lambda c: sql.live_workers(c, now - HEARTBEAT_STALE))
