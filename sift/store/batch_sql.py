"""The batch tables' SQL: named queries on a cursor, and the transactions built from them.

Each function runs inside a transaction its caller (`sift.store.batch`) opened, so the
composite operations combine them into one write transaction: two processes can neither
exceed a cap, double a count, nor set a terminal status twice (docs/WORKER.md §The store's
transactions). Metric counters are bumped in the same transaction as the event they count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

import apsw

from sift.status import JobStatus, TargetStatus
from sift.store import counters, rules, series, webhooks
from sift.store import events as event_log
from sift.store.records import (
    Caps,
    Claim,
    Fetched,
    Finished,
    Job,
    NewJob,
    ResultPage,
    SubmitOutcome,
    TargetRow,
)
from sift.store.rules import LIVE_STATUSES as _LIVE
from sift.store.rules import PENDING as _PENDING
from sift.store.rules import RUNNING as _RUNNING

_JOB_COLS = rules.columns(rules.JOB_COLUMNS)
_IN_LIVE = f"({', '.join('?' * len(_LIVE))})"


# -- the sliding lease (docs/API.md §Job lifetime, the rule in `rules`) -----------------------
# Besides the insert (lease = created_at), these are the only statements that write `lease`.


def _slide(
    cur: apsw.Cursor,
    now: float,
    where: str,
    where_args: Sequence,
    sets: str = "",
    set_args: Sequence = (),
    returning: str = "",
) -> apsw.Cursor:
    """`update batch_job set <sets>, lease = now where <where>`: every job write slides."""
    sets = f"{sets}, lease = ?" if sets else "lease = ?"
    tail = f" returning {returning}" if returning else ""
    return cur.execute(
        f"update batch_job set {sets} where {where}{tail}", (*set_args, now, *where_args)
    )


def _slide_job(
    cur: apsw.Cursor, job_id: str, now: float, sets: str = "", set_args=(), returning: str = ""
) -> apsw.Cursor:
    return _slide(cur, now, "id = ?", (job_id,), sets, set_args, returning)


def touch(cur: apsw.Cursor, job_id: str, now: float) -> bool:
    _slide_job(cur, job_id, now)
    return cur.getconnection().changes() > 0


def sweep(cur: apsw.Cursor, now: float, ttl: float) -> int:
    """Delete every job whose lease + ttl is not after `now` (its targets go with it)."""
    cur.execute(f"delete from batch_job where {rules.expired_sql('?')}", (ttl, now))
    return cur.getconnection().changes()


def _find_reusable(cur, caller: str, idem_key: str, now: float, ttl: float) -> Job | None:
    row = cur.execute(
        f"select {_JOB_COLS} from batch_job where caller = ? and idem_key = ? "
        f"and {rules.unexpired_sql('?')} "
        f"and status in ({', '.join('?' * len(rules.REUSABLE_STATUSES))}) "
        "order by created_at desc, rowid desc limit 1",
        (caller, idem_key, ttl, now, *rules.REUSABLE_STATUSES),
    ).fetchone()
    return Job(*row) if row else None


# -- reads --------------------------------------------------------------------------------------


def get_job(cur: apsw.Cursor, job_id: str) -> Job | None:
    row = cur.execute(f"select {_JOB_COLS} from batch_job where id = ?", (job_id,)).fetchone()
    return Job(*row) if row else None


def get_targets(cur: apsw.Cursor, job_id: str, *, results: bool = True) -> list[TargetRow]:
    cols = rules.columns(rules.TARGET_COLUMNS, results=results)
    return [
        TargetRow(*r)
        for r in cur.execute(
            f"select {cols} from batch_target where job_id = ? order by idx", (job_id,)
        )
    ]


def status(
    cur: apsw.Cursor, job_id: str, results: bool, page: ResultPage | None = None
) -> tuple[Job, list[TargetRow]] | None:
    """The job and its targets from one snapshot; with `page`, only that page's results."""
    job = get_job(cur, job_id)
    if job is None:
        return None
    if not results or page is None:
        return job, get_targets(cur, job_id, results=results)
    return job, _paged_targets(cur, job_id, page)


# Each result's bytes, counted from the page's first target, as a running total in idx order:
# a result is in the page when the total up to it stays within the page (or it is the first).
# The window runs over sizes only, so no result is buffered to compute it.
_PAGED = (
    "with sized as (select idx, "
    "case when idx >= :first then coalesce(length(cast(result as blob)), 0) else 0 end as own "
    "from batch_target where job_id = :job), "
    "run as (select idx, own, sum(own) over (order by idx) as upto from sized) "
    "select {cols} from batch_target t join run r on r.idx = t.idx where t.job_id = :job "
    "order by t.idx"
)
_PAGED_RESULT = "case when t.idx >= :first and (r.upto = r.own or r.upto <= :max) then t.result end"


def _paged_targets(cur: apsw.Cursor, job_id: str, page: ResultPage) -> list[TargetRow]:
    cols = rules.columns(rules.TARGET_COLUMNS, "t.").replace("t.result", _PAGED_RESULT)
    args = {"job": job_id, "first": page.first, "max": page.max_bytes}
    return [TargetRow(*r) for r in cur.execute(_PAGED.format(cols=cols), args)]


def count_live(cur: apsw.Cursor, caller: str | None = None, caller_class: str | None = None) -> int:
    """Live jobs in total, or of one caller (its owner string and, when given, its class)."""
    if caller is None:
        sql, args = f"select count(*) from batch_job where status in {_IN_LIVE}", _LIVE
    elif caller_class is None:
        sql = f"select count(*) from batch_job where caller = ? and status in {_IN_LIVE}"
        args = (caller, *_LIVE)
    else:
        sql = (
            "select count(*) from batch_job where caller = ? and caller_class = ? "
            f"and status in {_IN_LIVE}"
        )
        args = (caller, caller_class, *_LIVE)
    return cur.execute(sql, args).fetchone()[0]


def _live_counts(cur: apsw.Cursor, caller: str, caller_class: str) -> tuple[int, int]:
    """(live jobs of the caller's class, live jobs in total), one statement."""
    return cur.execute(
        "select coalesce(sum(caller = ? and caller_class = ?), 0), count(*) from batch_job "
        f"where status in {_IN_LIVE}",
        (caller, caller_class, *_LIVE),
    ).fetchone()


def oldest_live_job(cur: apsw.Cursor, caller: str, caller_class: str) -> str | None:
    """The caller's oldest live job: the one a `caller busy` refusal names."""
    row = cur.execute(
        f"select id from batch_job where caller = ? and caller_class = ? and status in {_IN_LIVE} "
        "order by created_at, rowid limit 1",
        (caller, caller_class, *_LIVE),
    ).fetchone()
    return row[0] if row else None


def live_owners(cur: apsw.Cursor) -> list[tuple[str, str, str]]:
    """(id, caller, class) of live jobs in submit order: the worker's rotation and whose each
    job is (docs/WORKER.md §Fair shares between callers)."""
    return [
        (r[0], r[1], r[2])
        for r in cur.execute(
            f"select id, caller, caller_class from batch_job where status in {_IN_LIVE} "
            "order by created_at, rowid",
            _LIVE,
        )
    ]


def live_jobs(cur: apsw.Cursor) -> list[str]:
    """Ids of live jobs in submit order."""
    return [job for job, _, _ in live_owners(cur)]


def terminal_among(cur: apsw.Cursor, job_ids: Sequence[str]) -> list[str]:
    """Which of these jobs are terminal (or gone): what long-polling readers wait for."""
    marks = ", ".join("?" * len(job_ids))
    live = {
        r[0]
        for r in cur.execute(
            f"select id from batch_job where id in ({marks}) and status in {_IN_LIVE}",
            (*job_ids, *_LIVE),
        )
    }
    return [j for j in job_ids if j not in live]


def gauges(cur: apsw.Cursor) -> tuple[int, int]:
    """(live jobs, targets in flight) for the queue-depth and in-flight gauges."""
    inflight = cur.execute(
        "select count(*) from batch_target where status = ?", (_RUNNING,)
    ).fetchone()[0]
    return count_live(cur), inflight


# -- submit, cancel, restart ---------------------------------------------------------------


def _create_job(cur: apsw.Cursor, job: NewJob, now: float) -> Job:
    cur.execute(
        "insert into batch_job(id, caller, caller_class, idem_key, status, error, targets_total, "
        "targets_done, created_at, lease, nbytes, retry_of) "
        "values (?, ?, ?, ?, ?, '', ?, 0, ?, ?, 0, ?)",
        (job.id, job.caller, job.caller_class, job.idem_key, rules.QUEUED, len(job.targets),
         now, now, job.retry_of),
    )  # fmt: skip
    cur.executemany(
        "insert into batch_target(job_id, idx, url, options, status) values (?, ?, ?, ?, ?)",
        [(job.id, i, t.url, t.options, _PENDING) for i, t in enumerate(job.targets)],
    )
    return get_job(cur, job.id)


def submit(
    cur: apsw.Cursor,
    job: NewJob,
    caps: Caps,
    now: float,
    ttl: float,
    fresh: bool = False,
    webhook: tuple | None = None,  # (url, event types, results)
) -> SubmitOutcome:
    """Idempotency, caps, insert and sweep, in the order docs/API.md §POST /v1/batch gives;
    `fresh` skips the reuse (the new job is then the one a later plain submit reuses)."""
    existing = None if fresh else _find_reusable(cur, job.caller, job.idem_key, now, ttl)
    if existing is not None:
        counters.bump(cur, series.JOBS_TOTAL, "reused")
        return SubmitOutcome("reused", existing)
    mine, total = _live_counts(cur, job.caller, job.caller_class)
    refusal = rules.submit_refusal(job, caps, mine, total)
    if refusal == "caller_busy":
        oldest = oldest_live_job(cur, job.caller, job.caller_class)
        return SubmitOutcome(refusal, live_job=oldest)
    if refusal is not None:
        return SubmitOutcome(refusal)
    created = _create_job(cur, job, now)
    if webhook is not None:  # webhooks (docs/API.md §Webhooks)
        webhooks.set_webhook(cur, job.id, *webhook)
    counters.bump(cur, series.JOBS_TOTAL, "created")
    sweep(cur, now, ttl)
    return SubmitOutcome("created", created)


def cancel(cur: apsw.Cursor, job_id: str, now: float) -> Job | None:
    """Flip a live job to `cancelled`; returns the job as it was before (None if unknown)."""
    job = get_job(cur, job_id)
    if job is not None and job.status in _LIVE:
        _slide_job(cur, job_id, now, "status = ?", (str(JobStatus.CANCELLED),))
        counters.bump(cur, series.JOBS_TOTAL, "cancelled")
        event_log.record_end(cur, job_id, now)  # event log (docs/API.md §Events)
    return job


def restart(cur: apsw.Cursor, now: float) -> int:
    """A worker becomes active: every started (`running`) job fails with `restart`, counted
    once each; it never resumes. A `queued` job has had no target taken, so nothing of it was
    lost: it stays queued and the new worker starts it from the beginning, which is what makes
    a submit while no worker runs safe (docs/WORKER.md §Restart semantics).

    Nothing is in flight when a worker starts: a target left `running` (a cancelled job's
    included) belonged to the dead worker and would count as in flight forever, so it goes
    back to `pending`.
    """
    cur.execute(
        "update batch_target set status = ?, retry_at = null where status = ?",
        (_PENDING, _RUNNING),
    )
    ending = event_log.running_jobs(cur)  # event log (docs/API.md §Events)
    _slide(
        cur,
        now,
        "status = ?",
        (str(JobStatus.RUNNING),),
        "status = ?, error = ?",
        (str(JobStatus.FAILED), "restart"),
    )
    failed = cur.getconnection().changes()
    for job_id in ending:  # event log
        event_log.record_end(cur, job_id, now)
    if failed:
        counters.bump(cur, series.JOBS_TOTAL, "restart", failed)
    return failed


# -- the drain: claim, requeue, finish -------------------------------------------------------


# The job, whether one of its targets is in flight, and its lowest pending target: one
# statement, each part on the index it used as a statement of its own.
_CLAIMABLE = (
    "select j.status, j.caller, j.caller_class, "
    "(select 1 from batch_target where job_id = j.id and status = ?1), "
    "t.idx, t.url, t.options, t.busy_since, t.retry_at from batch_job j "
    "left join batch_target t on t.rowid = (select rowid from batch_target "
    "where job_id = j.id and status = ?2 order by idx limit 1) where j.id = ?3"
)


def claim(cur: apsw.Cursor, job_id: str, now: float) -> Claim | None:
    """Take the job's next ready target, if the job is live and has nothing in flight."""
    row = cur.execute(_CLAIMABLE, (_RUNNING, _PENDING, job_id)).fetchone()
    # The lowest pending target only, and none while one is running: a job stays serial even
    # while that target waits to retry after "busy" (target i+1 never starts before i is
    # stored).
    if row is None or row[0] not in _LIVE or row[3] or row[4] is None:
        return None
    status, caller, caller_class, _, idx, url, options, busy_since, retry_at = row
    if retry_at is not None and retry_at > now:
        return None
    cur.execute(
        "update batch_target set status = ?, started_at = ? where job_id = ? and idx = ?",
        (_RUNNING, now, job_id, idx),
    )
    if status == JobStatus.QUEUED:
        _slide_job(cur, job_id, now, "status = ?, started_at = ?", (str(JobStatus.RUNNING), now))
        event_log.record_running(cur, job_id, now)  # event log (docs/API.md §Events)
    else:
        _slide_job(cur, job_id, now)
    return Claim(job_id, idx, url, options, caller, caller_class, busy_since)


def requeue(
    cur: apsw.Cursor,
    job_id: str,
    idx: int,
    *,
    retry_at: float,
    busy_since: float | None,
    now: float,
    reason: str | None = None,
) -> bool:
    """A busy target goes back to `pending`, to be retried at `retry_at`; `reason` says why
    it waits (docs/API.md §Waiting targets)."""
    cur.execute(
        "update batch_target set status = ?, retry_at = ?, busy_since = ? "
        "where job_id = ? and idx = ? and status = ?",
        (_PENDING, retry_at, busy_since, job_id, idx, _RUNNING),
    )
    changed = cur.getconnection().changes() > 0
    if changed:
        cur.execute("delete from target_wait where job_id = ? and idx = ?", (job_id, idx))
        if reason:
            cur.execute(
                "insert into target_wait(job_id, idx, reason) values (?, ?, ?)",
                (job_id, idx, reason),
            )
        _slide_job(cur, job_id, now)
    return changed


class _Progress(NamedTuple):
    """The job right after a target is stored (from the same statement)."""

    status: str
    targets_done: int
    targets_total: int
    created_at: float
    caller_class: str
    hooks: str | None  # the kinds its webhook asks for (None: no webhook)


def _store_target(cur, job_id: str, idx: int, fetched: Fetched, now: float) -> _Progress | None:
    """Rewrite a running target with its outcome and count it into its job; None when the
    target is not running (or is gone). Two statements: what the event log and the outbox
    need of the job comes back with the count."""
    kept = rules.stored(fetched)
    cur.execute(
        "update batch_target set status = ?, result = ?, error = ?, hint = ?, retry_at = null, "
        "retryable = ?, retry_after = ? where job_id = ? and idx = ? and status = ?",
        (fetched.status, kept.result, kept.error, kept.hint,
         None if kept.retryable is None else int(kept.retryable), kept.retry_after, job_id, idx,
         _RUNNING),
    )  # fmt: skip
    if not cur.getconnection().changes():
        return None
    row = _slide_job(
        cur,
        job_id,
        now,
        "targets_done = targets_done + ?, nbytes = nbytes + ?",
        (kept.done, kept.nbytes),
        returning="status, targets_done, targets_total, created_at, caller_class, "
        "(select events from batch_webhook w where w.job_id = batch_job.id)",
    ).fetchone()
    return _Progress(*row)


def _failed(cur: apsw.Cursor, job_id: str) -> int:
    return cur.execute(
        "select count(*) from batch_target where job_id = ? and status = ?",
        (job_id, str(TargetStatus.FAILED)),
    ).fetchone()[0]


def _evict_oldest(cur: apsw.Cursor, max_bytes: int, for_job: str | None = None) -> int:
    """Remove the finished jobs `rules.eviction_victims` names (docs/WORKER.md §Byte budget)."""
    total = cur.execute("select coalesce(sum(nbytes), 0) from batch_job").fetchone()[0]
    if total <= max_bytes:
        return 0
    jobs = [
        rules.Held(job_id, (owner, klass), nbytes, bool(ended))
        for job_id, owner, klass, nbytes, ended in cur.execute(
            f"select id, caller, caller_class, nbytes, status not in {_IN_LIVE} from batch_job "
            "order by lease, rowid",
            _LIVE,
        )
    ]
    victims = rules.eviction_victims(jobs, max_bytes, for_job)
    cur.executemany("delete from batch_job where id = ?", [(v,) for v in victims])
    return len(victims)


def finish(
    cur: apsw.Cursor,
    job_id: str,
    idx: int,
    fetched: Fetched,
    now: float,
    max_bytes: int | None = None,
    then_claim: Sequence[str] = (),
) -> Finished:
    """Store a fetched target, count it, set the job's terminal status exactly once, keep
    the byte budget, and claim the next target: one transaction (see `BatchOps.finish`)."""
    finished = _finish_target(cur, job_id, idx, fetched, now)
    if finished.stored and fetched.result is not None and max_bytes is not None:
        finished = replace(finished, evicted=_evict_oldest(cur, max_bytes, job_id))
    for next_job in then_claim:
        claimed = claim(cur, next_job, now)
        if claimed is not None:
            return replace(finished, next=claimed)
    return finished


def _finish_target(cur, job_id: str, idx: int, fetched: Fetched, now: float) -> Finished:
    job = _store_target(cur, job_id, idx, fetched, now)
    if job is None:
        return Finished(False)
    failure = (fetched.error, fetched.hint, fetched.retryable, fetched.retry_after)
    event_log.record_target(  # event log (docs/API.md §Events)
        cur, job_id, idx, fetched.status, fetched.outcome, now, fetched.result, failure,
        (job.caller_class, job.status, job.hooks),
    )  # fmt: skip
    rows = rules.stored_rows(fetched)
    if job.status not in _LIVE or job.targets_done < job.targets_total:
        counters.bump_many(cur, rows)
        return Finished(True)
    terminal = rules.terminal_status(_failed(cur, job_id), job.targets_total)
    _slide_job(cur, job_id, now, "status = ?", (terminal,))
    event_log.record_end(cur, job_id, now)  # event log (docs/API.md §Events)
    counters.bump_many(cur, rows + rules.terminal_rows(terminal, now - job.created_at))
    return Finished(True, terminal)
