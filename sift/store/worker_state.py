"""The worker's heartbeat row, so the API's /healthz can tell whether a worker is alive."""

from __future__ import annotations

from sift.store.db import Database
from sift.store.records import Heartbeat


class WorkerState:
    def __init__(self, db: Database, *, dead_after: float = 15.0):
        self._db = db
        self.dead_after = dead_after  # a heartbeat older than this: no live worker

    async def beat(self, pid: int, started_at: float, now: float) -> None:
        await self._db.on_writer(
            lambda c: c.execute(
                "insert into worker_state(id, pid, started_at, heartbeat) values (1, ?, ?, ?) "
                "on conflict(id) do update set pid = excluded.pid, "
                "started_at = excluded.started_at, heartbeat = excluded.heartbeat",
                (pid, started_at, now),
            )
        )

    async def clear(self, pid: int) -> None:
        """A clean exit: forget the heartbeat if it is still ours."""
        await self._db.on_writer(
            lambda c: c.execute("delete from worker_state where pid = ?", (pid,))
        )

    async def get(self, now: float) -> Heartbeat | None:
        """The heartbeat (one box, one clock: `now` changes nothing here)."""
        row = await self._db.on_reader(
            lambda c: c.execute(
                "select pid, started_at, heartbeat from worker_state where id = 1"
            ).fetchone()
        )
        return Heartbeat(*row) if row else None

    async def live(self, now: float) -> int:
        """0 or 1: one SQLite file has one active worker (its lock keeps others on standby)."""
        beat = await self.get(now)
        return int(beat is not None and now - beat.heartbeat < self.dead_after)
