"""The worker's heartbeat row, so the API's /healthz can tell whether a worker is alive."""

from __future__ import annotations

from dataclasses import dataclass

from sift.store.db import Database


@dataclass(frozen=True, slots=True)
class Heartbeat:
    pid: int
    started_at: float
    heartbeat: float


class WorkerState:
    def __init__(self, db: Database):
        self.db = db

    def beat(self, pid: int, started_at: float, now: float) -> None:
        self.db.write(
            lambda c: c.execute(
                "insert into worker_state(id, pid, started_at, heartbeat) values (1, ?, ?, ?) "
                "on conflict(id) do update set pid = excluded.pid, "
                "started_at = excluded.started_at, heartbeat = excluded.heartbeat",
                (pid, started_at, now),
            )
        )

    def clear(self, pid: int) -> None:
        """A clean exit: forget the heartbeat if it is still ours."""
        self.db.write(lambda c: c.execute("delete from worker_state where pid = ?", (pid,)))

    def get(self) -> Heartbeat | None:
        row = self.db.read(
            lambda c: c.execute(
                "select pid, started_at, heartbeat from worker_state where id = 1"
            ).fetchone()
        )
        return Heartbeat(*row) if row else None
