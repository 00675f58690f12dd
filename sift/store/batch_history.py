"""A caller's jobs as a list, and the links between a job and its retries (docs/API.md
§GET /v1/batch, §POST /v1/batch/{id}/retry).

Named queries on a cursor, like `batch_sql`, run inside the transactions `BatchStore` opens.
The list is keyset-paginated on (live first, newest first, id), so a page costs the same
however deep it is and a job submitted meanwhile never shifts the next page.
"""

from __future__ import annotations

import apsw

from sift.status import TargetStatus
from sift.store import rules
from sift.store.records import JobSummary, ListPosition

_LIVE = rules.LIVE_STATUSES
_IN_LIVE = f"({', '.join('?' * len(_LIVE))})"


def list_jobs(
    cur: apsw.Cursor,
    caller: str,
    caller_class: str,
    *,
    now: float,
    ttl: float,
    limit: int,
    after: ListPosition | None = None,
) -> list[JobSummary]:
    """Up to `limit` of the caller's unexpired jobs, live first, then newest first."""
    where, args = rules.after_sql("?", after)
    sql = f"""
        select id, status, targets_total, targets_done,
            (select count(*) from batch_target t where t.job_id = j.id and t.status = ?),
            created_at, lease, retry_of, ended
        from (select *, (status not in {_IN_LIVE}) as ended from batch_job) j
        where caller = ? and caller_class = ? and {rules.unexpired_sql("?")} {where}
        {rules.LIST_ORDER}
        limit ?"""
    rows = cur.execute(
        sql,
        (str(TargetStatus.FAILED), *_LIVE, caller, caller_class, ttl, now, *args, limit),
    )
    return [JobSummary(*r) for r in rows]


def links(cur: apsw.Cursor, job_id: str) -> tuple[str | None, list[str]]:
    """(the job this one retries, the jobs that retry this one, oldest first)."""
    row = cur.execute("select retry_of from batch_job where id = ?", (job_id,)).fetchone()
    retries = [
        r[0]
        for r in cur.execute(
            "select id from batch_job where retry_of = ? order by created_at, rowid", (job_id,)
        )
    ]
    return (row[0] if row else None), retries
