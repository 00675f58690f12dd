"""A caller's jobs as a list, and the links between a job and its retries (docs/API.md
§GET /v1/batch, §POST /v1/batch/{id}/retry).

Named queries on a cursor, like `batch_rows`, so they compose inside the reads and writes of
`BatchStore`. The list is keyset-paginated on (live first, newest first, id), so a page costs
the same however deep it is and a job submitted meanwhile never shifts the next page.
"""

from __future__ import annotations

from typing import NamedTuple

import apsw

from sift.status import LIVE, TargetStatus

_LIVE = tuple(str(s) for s in LIVE)
_IN_LIVE = f"({', '.join('?' * len(_LIVE))})"


class JobSummary(NamedTuple):
    """One entry of a caller's job list."""

    id: str
    status: str
    targets_total: int
    targets_done: int
    targets_failed: int
    created_at: float
    lease: float
    retry_of: str | None
    ended: int  # 0 live, 1 ended: the list's first sort key


class ListPosition(NamedTuple):
    """Where a page ended: the next page starts after this entry."""

    ended: int
    created_at: float
    id: str


def q_list_jobs(
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
    where = ""
    args: list = []
    if after is not None:
        where = "and (ended > ? or (ended = ? and (created_at < ? or (created_at = ? and id < ?))))"
        args = [after.ended, after.ended, after.created_at, after.created_at, after.id]
    sql = f"""
        select id, status, targets_total, targets_done,
            (select count(*) from batch_target t where t.job_id = j.id and t.status = ?),
            created_at, lease, retry_of, ended
        from (select *, (status not in {_IN_LIVE}) as ended from batch_job) j
        where caller = ? and caller_class = ? and lease + ? > ? {where}
        order by ended, created_at desc, id desc
        limit ?"""
    rows = cur.execute(
        sql,
        (str(TargetStatus.FAILED), *_LIVE, caller, caller_class, ttl, now, *args, limit),
    )
    return [JobSummary(*r) for r in rows]


def q_links(cur: apsw.Cursor, job_id: str) -> tuple[str | None, list[str]]:
    """(the job this one retries, the jobs that retry this one, oldest first)."""
    row = cur.execute("select retry_of from batch_job where id = ?", (job_id,)).fetchone()
    retries = [
        r[0]
        for r in cur.execute(
            "select id from batch_job where retry_of = ? order by created_at, rowid", (job_id,)
        )
    ]
    return (row[0] if row else None), retries


def q_oldest_live_job(cur: apsw.Cursor, caller: str) -> str | None:
    """The caller's oldest live job: the one a `caller busy` refusal names."""
    row = cur.execute(
        f"select id from batch_job where caller = ? and status in {_IN_LIVE} "
        "order by created_at, rowid limit 1",
        (caller, *_LIVE),
    ).fetchone()
    return row[0] if row else None
