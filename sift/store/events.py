"""The job event log on SQLite: rows appended inside the batch transactions, and its reads.

The `record_*` functions run on the cursor of the transaction that makes the change (claim,
finish, cancel, restart in `batch_sql`), so an event exists exactly when its change committed
(docs/API.md §Events). What each row says is `sift.store.event_rules`' decision.
"""

from __future__ import annotations

import apsw

from sift.status import TargetStatus
from sift.store import batch_sql as _batch
from sift.store import event_rules as rules
from sift.store.db import Database
from sift.store.event_rules import EventRow
from sift.store.records import Job


def _append(
    cur: apsw.Cursor,
    job_id: str,
    kind: str,
    idx: int | None,
    now: float,
    data: str,
    hooks: str | None = "",
):
    """The event, and its delivery when the job's webhook asks for this kind (the outbox,
    docs/API.md §Webhooks): both in the caller's transaction. `hooks`: the kinds the job's
    webhook asks for when the caller read them already (None: the job has no webhook), else
    "" and the outbox insert looks."""
    event_id = cur.execute(
        "insert into batch_event(job_id, id, kind, idx, at, data) "
        "select ?, coalesce(max(id), 0) + 1, ?, ?, ?, ? from batch_event where job_id = ? "
        "returning id",
        (job_id, kind, idx, now, data, job_id),
    ).fetchone()[0]
    if hooks is None or (hooks and f",{kind}," not in hooks):
        return
    cur.execute(
        "insert into webhook_outbox(job_id, event_id, state, next_try) "
        "select job_id, ?, 'pending', ? from batch_webhook where job_id = ? and instr(events, ?)",
        (event_id, now, job_id, f",{kind},"),
    )


def _job(cur: apsw.Cursor, job_id: str) -> tuple | None:
    return cur.execute(
        "select caller_class, status, error, targets_total, targets_done, "
        "(select count(*) from batch_target where job_id = ?1 and status = ?2) "
        "from batch_job where id = ?1",
        (job_id, str(TargetStatus.FAILED)),
    ).fetchone()


def record_running(cur: apsw.Cursor, job_id: str, now: float) -> None:
    _append(cur, job_id, rules.JOB_RUNNING, None, now, rules.running_data())


def record_target(
    cur: apsw.Cursor,
    job_id: str,
    idx: int,
    status: str,
    outcome: str,
    now: float,
    result,
    failure,
    job: tuple[str, str, str | None],
) -> None:
    """A target was stored (`failure`: error, hint, retryable, retry_after; `job`: its
    class, status and webhook's kinds, as the finish's own statement read them)."""
    kind = rules.target_kind(status)
    caller_class, job_status, hooks = job
    if kind is None or not rules.announces_targets(job_status):
        return
    error, hint, retryable, retry_after = failure
    data = rules.target_data(
        idx, status, outcome, result=result, error=error, hint=hint, retryable=retryable,
        retry_after=retry_after, restricted=caller_class == rules.RESTRICTED,
    )  # fmt: skip
    _append(cur, job_id, kind, idx, now, data, hooks)


def record_end(cur: apsw.Cursor, job_id: str, now: float) -> None:
    """The job has just taken its terminal status (in this transaction)."""
    job = _job(cur, job_id)
    if job is None or job[1] not in rules.JOB_ENDS:
        return
    klass, status, error, total, done, failed = job
    data = rules.end_data(status, error, total, done, failed, restricted=klass == rules.RESTRICTED)
    _append(cur, job_id, rules.JOB_ENDS[status], None, now, data)


def running_jobs(cur: apsw.Cursor) -> list[str]:
    """The jobs a restart is about to fail (their `job.failed` follows the update)."""
    return [r[0] for r in cur.execute("select id from batch_job where status = 'running'")]


def read(
    cur: apsw.Cursor, job_id: str, after: int, results: bool
) -> tuple[Job, list[EventRow]] | None:
    """The job and its events after `after`, from one snapshot; a restricted caller's get no
    url, and a target's result only with `results`."""
    job = _batch.get_job(cur, job_id)
    if job is None:
        return None
    result = "t.result" if results else "null"
    url = "null" if job.caller_class == rules.RESTRICTED else "t.url"
    found = cur.execute(
        f"select e.job_id, e.id, e.kind, e.idx, e.at, e.data, {url}, "
        f"case when e.kind = ? then {result} end from batch_event e "
        "left join batch_target t on t.job_id = e.job_id and t.idx = e.idx "
        "where e.job_id = ? and e.id > ? order by e.id",
        (rules.TARGET_DONE, job_id, after),
    )
    return job, [EventRow(*r) for r in found]


def last_ids(cur: apsw.Cursor, job_ids) -> dict[str, int]:
    """Each existing job's last event id (0 before its first); a gone job is left out."""
    marks = ", ".join("?" * len(job_ids))
    return {
        r[0]: r[1]
        for r in cur.execute(
            "select j.id, coalesce((select max(id) from batch_event e where e.job_id = j.id), 0) "
            f"from batch_job j where j.id in ({marks})",
            tuple(job_ids),
        )
    }


class EventLog:
    """The store's `events` part: reads of a job's log (writes happen in the batch
    transactions)."""

    def __init__(self, db: Database):
        self._db = db

    async def read(
        self, job_id: str, *, after: int = 0, results: bool = False
    ) -> tuple[Job, list[EventRow]] | None:
        return await self._db.on_reader(lambda c: read(c, job_id, after, results))

    async def last_ids(self, job_ids) -> dict[str, int]:
        """What the stream waiter watches: each job's last event id; gone jobs left out."""
        return await self._db.on_reader(lambda c: last_ids(c, list(job_ids)))
