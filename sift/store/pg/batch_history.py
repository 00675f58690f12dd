"""A caller's jobs as a list on PostgreSQL: the query of `sift.store.batch_history` in this
engine's dialect (docs/API.md §GET /v1/batch). The retry links come with the status statement
(`batch_sql.status`)."""

from __future__ import annotations

from sift.status import TargetStatus
from sift.store import rules
from sift.store.pg.db import Conn, rows
from sift.store.records import JobSummary, ListPosition

_LIVE = list(rules.LIVE_STATUSES)


async def list_jobs(
    conn: Conn,
    caller: str,
    caller_class: str,
    *,
    now: float,
    ttl: float,
    limit: int,
    after: ListPosition | None = None,
) -> list[JobSummary]:
    """Up to `limit` of the caller's unexpired jobs, live first, then newest first."""
    where, args = rules.after_sql("%s", after)
    found = await rows(
        conn,
        "select id, status, targets_total, targets_done, "
        "  (select count(*) from batch_target t where t.job_id = j.id and t.status = %s), "
        "  created_at, lease, retry_of, ended "
        "from (select *, (case when status = any(%s) then 0 else 1 end) as ended "
        "  from batch_job) j "
        f"where caller = %s and caller_class = %s and {rules.unexpired_sql('%s')} {where} "
        f"{rules.LIST_ORDER} limit %s",
        (str(TargetStatus.FAILED), _LIVE, caller, caller_class, ttl, now, *args, limit),
    )
    return [JobSummary(*r) for r in found]
