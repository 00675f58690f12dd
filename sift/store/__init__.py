"""The shared database: only this package speaks SQL.

`Store` opens `state_dir/sift.db` and groups the table accessors: `batch` (jobs and targets),
`cache` (raw responses), `digests` (answers), `worker` (heartbeat) and `counters` (metrics).
"""

from __future__ import annotations

from pathlib import Path

import apsw

from sift.config import Config
from sift.store import counters
from sift.store.batch import BatchStore, Claim, Job, NewTarget, SubmitOutcome, TargetRow
from sift.store.batch_history import JobSummary, ListPosition
from sift.store.cache import CachedResponse, ContentCache, DigestCache
from sift.store.db import Database, StoreBusy, StoreError
from sift.store.worker_state import Heartbeat, WorkerState

# Everything a store call may raise: library code logs these and goes on (SPEC §4.3 rule 8).
STORE_ERRORS = (apsw.Error, StoreBusy, StoreError)

__all__ = [
    "STORE_ERRORS",
    "BatchStore",
    "CachedResponse",
    "Claim",
    "ContentCache",
    "Database",
    "DigestCache",
    "Heartbeat",
    "Job",
    "JobSummary",
    "ListPosition",
    "NewTarget",
    "Store",
    "StoreBusy",
    "StoreError",
    "SubmitOutcome",
    "TargetRow",
    "WorkerState",
    "open_store",
]


class Store:
    def __init__(
        self,
        db: Database,
        *,
        cache_ttl: float = 900.0,
        cache_max_bytes: int = 256 * 1024 * 1024,
        digest_ttl: float = 86400.0,
    ):
        self.db = db
        self.batch = BatchStore(db)
        self.cache = ContentCache(db, ttl=cache_ttl, max_bytes=cache_max_bytes)
        self.digests = DigestCache(db, ttl=digest_ttl)
        self.worker = WorkerState(db)

    def read_counters(self) -> dict[tuple[str, str], float]:
        return self.db.read(counters.read_all)

    def close(self) -> None:
        self.db.close()


def open_store(cfg: Config) -> Store:
    """Open (and migrate) the database under the configured state dir."""
    state_dir = Path(cfg.store.state_dir)
    if not state_dir.is_dir():
        raise StoreError(f"state dir {state_dir} does not exist")
    db = Database(cfg.db_path, busy_timeout=cfg.store.busy_timeout)
    return Store(db, cache_ttl=cfg.cache.ttl, cache_max_bytes=cfg.cache.max_bytes)
