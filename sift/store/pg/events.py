"""The job event log on PostgreSQL: the rows `sift.store.events` keeps on SQLite, appended in
the same transactions (claim, finish, cancel, the reaping of a lost target), with the same
rules (`sift.store.event_rules`). Each append is one statement under the job's row lock, which
every writer of a job already holds, so ids increase without gaps; it notifies `sift_events`
with the job id when it commits, which wakes that job's streams on every API box, and
`sift_hooks` when it queued a delivery, which wakes the senders (docs/ARCHITECTURE.md
§Wake-ups).
"""

from __future__ import annotations

from sift.status import TargetStatus
from sift.store import event_rules as rules
from sift.store import rules as _rules
from sift.store.event_rules import EventRow
from sift.store.pg.db import Conn, PgDatabase, one, rows
from sift.store.pg.notify import EVENTS, HOOKS
from sift.store.records import Job

_JOB_COLS = _rules.columns(_rules.JOB_COLUMNS, "j.")


def append_ctes(name: str, source: str) -> str:
    """Two CTEs appending one event to each job `source` (a subquery of job ids, `id`) names,
    with its delivery when the job's webhook asks for this kind (the outbox, docs/API.md
    §Webhooks); their arguments are `append_args`. So a statement that makes a change can
    append its event itself, only when the change happened. The new id reads the log in the
    statement's snapshot: every caller holds the job's row lock, and no other writer appends
    to a job whose change this statement could still make (a cancel ends the job, which then
    announces nothing more)."""
    return (
        f"{name} as (insert into batch_event(job_id, id, kind, idx, at, data) "
        "  select j.id, coalesce((select max(id) from batch_event where job_id = j.id), 0) + 1, "
        "  %s, %s, %s, case when j.caller_class = %s then %s else %s end "
        f"  from batch_job j where j.id in {source} "
        f"  returning job_id, id, pg_notify('{EVENTS}', job_id)), "
        f"{name}_out as (insert into webhook_outbox(job_id, event_id, state, next_try) "
        f"  select e.job_id, e.id, 'pending', %s from {name} e "
        "  join batch_webhook w on w.job_id = e.job_id "
        f"  where position(%s in w.events) > 0 returning pg_notify('{HOOKS}', job_id))"
    )


def append_args(kind: str, idx, now: float, data: str, redacted: str, source_args=()) -> tuple:
    """`append_ctes`' arguments (`source_args`: the source's own); `redacted` is the data a
    restricted caller's event keeps."""
    return (kind, idx, now, rules.RESTRICTED, redacted, data, *source_args, now, f",{kind},")


async def _append(conn: Conn, job_id: str, kind: str, idx, now: float, data: str, redacted: str):
    """One event and its delivery, in one statement."""
    await conn.execute(
        f"with {append_ctes('e', '(%s)')} select 1",
        append_args(kind, idx, now, data, redacted, (job_id,)),
    )


def target_event(idx: int, status: str, outcome: str, result, failure):
    """(kind, data, redacted) of the event a stored target appends while its job is live, or
    None for a status that appends none (`failure`: error, hint, retryable, retry_after)."""
    kind = rules.target_kind(status)
    if kind is None:
        return None
    error, hint, retryable, retry_after = failure
    fields = dict(result=result, error=error, hint=hint, retryable=retryable,
                  retry_after=retry_after)  # fmt: skip
    data, redacted = (
        rules.target_data(idx, status, outcome, restricted=r, **fields) for r in (False, True)
    )
    return kind, data, redacted


async def record_target(
    conn: Conn, job_id: str, idx: int, status: str, outcome: str, now: float, job_status: str,
    result, failure,
) -> None:  # fmt: skip
    """A target was stored (`failure`: error, hint, retryable, retry_after) while its job
    was `job_status`."""
    event = target_event(idx, status, outcome, result, failure)
    if event is None or not rules.announces_targets(job_status):
        return
    kind, data, redacted = event
    await _append(conn, job_id, kind, idx, now, data, redacted)


async def record_end(
    conn: Conn, job_id: str, now: float, status: str, error: str, total: int, done: int,
    failed: int | None = None,
) -> None:  # fmt: skip
    """The job has just taken its terminal status; `failed` is counted when not given."""
    if failed is None:
        failed = (
            await one(
                conn,
                "select count(*) from batch_target where job_id = %s and status = %s",
                (job_id, str(TargetStatus.FAILED)),
            )
        )[0]
    data, redacted = (
        rules.end_data(status, error, total, done, failed, restricted=r) for r in (False, True)
    )
    await _append(conn, job_id, rules.JOB_ENDS[status], None, now, data, redacted)


async def read(conn: Conn, job_id: str, after: int, results: bool):
    """The job and its events after `after`, from one statement: one snapshot, one round trip
    (every woken stream's read)."""
    result = "t.result" if results else "null"
    found = await rows(
        conn,
        f"select {_JOB_COLS}, e.job_id, e.id, e.kind, e.idx, e.at, e.data, "
        "case when j.caller_class = %s then null else t.url end, "
        f"case when e.kind = %s then {result} end from batch_job j "
        "left join batch_event e on e.job_id = j.id and e.id > %s "
        "left join batch_target t on t.job_id = e.job_id and t.idx = e.idx "
        "where j.id = %s order by e.id",
        (rules.RESTRICTED, rules.TARGET_DONE, after, job_id),
    )
    if not found:
        return None
    n = len(Job._fields)
    return Job(*found[0][:n]), [EventRow(*r[n:]) for r in found if r[n] is not None]


async def last_ids(conn: Conn, job_ids) -> dict[str, int]:
    found = await rows(
        conn,
        "select j.id, coalesce((select max(id) from batch_event e where e.job_id = j.id), 0) "
        "from batch_job j where j.id = any(%s)",
        (list(job_ids),),
    )
    return {r[0]: r[1] for r in found}


class PgEventLog:
    """The store's `events` part on PostgreSQL (see `sift.store.events.EventLog`)."""

    def __init__(self, db: PgDatabase):
        self._db = db

    async def read(
        self, job_id: str, *, after: int = 0, results: bool = False
    ) -> tuple[Job, list[EventRow]] | None:
        return await self._db.statement(lambda c: read(c, job_id, after, results))

    async def last_ids(self, job_ids) -> dict[str, int]:
        return await self._db.statement(lambda c: last_ids(c, job_ids))
