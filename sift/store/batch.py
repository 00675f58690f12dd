"""The batch tables' accessors (SPEC §4.2), over one `Database`.

The store is pure: every accessor that involves time takes `now`; accessors are keyed by job id
only (ownership is the API's job); a miss returns None or a count, never an exception. The
runner's composite operations live in `batch_ops` and are mixed in; rows and named queries live
in `batch_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sift.store.batch_history import JobSummary, ListPosition, q_links, q_list_jobs
from sift.store.batch_ops import RunnerOps
from sift.store.batch_rows import (
    Claim,
    Finished,
    Job,
    NewTarget,
    SubmitOutcome,
    TargetRow,
    q_count_live,
    q_create_job,
    q_evict_oldest,
    q_find_idempotent,
    q_get_job,
    q_mark_in_flight_failed,
    q_set_status,
    q_sweep,
    q_targets,
    q_update_target,
)
from sift.store.db import Database

__all__ = ["BatchStore", "Claim", "Finished", "Job", "NewTarget", "SubmitOutcome", "TargetRow"]


class BatchStore(RunnerOps):
    """The batch accessors over one `Database`; each call is one transaction."""

    def __init__(self, db: Database):
        self.db = db

    # -- SPEC §4.2 accessors ------------------------------------------------------------------

    def create_job(
        self,
        job_id: str,
        caller: str,
        caller_class: str,
        idem_key: str,
        targets: Sequence[NewTarget],
        now: float,
    ) -> Job:
        return self.db.write(
            lambda c: q_create_job(c, job_id, caller, caller_class, idem_key, targets, now)
        )

    def get_job(self, job_id: str) -> Job | None:
        return self.db.read(lambda c: q_get_job(c, job_id))

    def get_targets(self, job_id: str, *, results: bool = True) -> list[TargetRow]:
        return self.db.read(lambda c: q_targets(c, job_id, results=results))

    def get_status(
        self, job_id: str, *, results: bool = True
    ) -> tuple[Job, list[TargetRow]] | None:
        """The job and its targets from one snapshot."""

        def read(c):
            job = q_get_job(c, job_id)
            return (job, q_targets(c, job_id, results=results)) if job else None

        return self.db.read(read)

    def list_jobs(
        self,
        caller: str,
        caller_class: str,
        *,
        now: float,
        ttl: float,
        limit: int,
        after: ListPosition | None = None,
    ) -> list[JobSummary]:
        return self.db.read(
            lambda c: q_list_jobs(
                c, caller, caller_class, now=now, ttl=ttl, limit=limit, after=after
            )
        )

    def get_status_links(
        self, job_id: str, *, results: bool = True
    ) -> tuple[Job, list[TargetRow], str | None, list[str]] | None:
        """The job, its targets, and its retry links (`retry_of`, `retries`), one snapshot."""

        def read(c):
            job = q_get_job(c, job_id)
            if job is None:
                return None
            return (job, q_targets(c, job_id, results=results), *q_links(c, job_id))

        return self.db.read(read)

    def find_idempotent(self, caller: str, idem_key: str, now: float, ttl: float) -> Job | None:
        return self.db.read(lambda c: q_find_idempotent(c, caller, idem_key, now, ttl))

    def count_live(self, caller: str | None = None) -> int:
        return self.db.read(lambda c: q_count_live(c, caller))

    def update_target(
        self,
        job_id: str,
        idx: int,
        status: str,
        now: float,
        *,
        result: str | None = None,
        error: str | None = None,
        hint: str | None = None,
    ) -> bool:
        return (
            self.db.write(
                lambda c: q_update_target(
                    c, job_id, idx, status, now, result=result, error=error, hint=hint
                )
            )
            is not None
        )

    def set_status(self, job_id: str, status: str, now: float, error: str | None = None) -> bool:
        return self.db.write(lambda c: q_set_status(c, job_id, status, now, error))

    def touch(self, job_id: str, now: float) -> bool:
        def write(c):
            c.execute("update batch_job set lease = ? where id = ?", (now, job_id))
            return c.getconnection().changes() > 0

        return self.db.write(write)

    def sweep(self, now: float, ttl: float) -> int:
        return self.db.write(lambda c: q_sweep(c, now, ttl))

    def evict_oldest(self, max_bytes: int) -> int:
        """Remove whole finished jobs, oldest lease first, until batch bytes fit the budget."""
        if self.batch_nbytes() <= max_bytes:  # a read: no write lock when within budget
            return 0
        return self.db.write(lambda c: q_evict_oldest(c, max_bytes))

    def mark_in_flight_failed(self, reason: str, now: float) -> int:
        return self.db.write(lambda c: q_mark_in_flight_failed(c, reason, now))

    def batch_nbytes(self) -> int:
        return self.db.read(
            lambda c: c.execute("select coalesce(sum(nbytes), 0) from batch_job").fetchone()[0]
        )
