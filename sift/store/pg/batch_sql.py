"""The batch tables' SQL for PostgreSQL: one named query per store operation.

The same operations, arguments and answers as `sift.store.batch_sql` (the SQLite engine), and
the same rules (docs/WORKER.md §The store's transactions); what differs is how a rule is kept
when several processes on several boxes write at once:

* a job's row lock serialises everything done to one job: `claim` takes it with
  `FOR UPDATE SKIP LOCKED` (a job another worker is claiming or storing right now is skipped,
  as if it had a target in flight), `finish`, `requeue` and `cancel` wait for it;
* submits take one transaction-level advisory lock, since the caps count live jobs across every
  box and two identical submits on two boxes must make one job;
* a claimed target records the worker holding it (kept once stored: who fetched it), so `reap`
  fails only targets in flight on a worker whose heartbeat went silent (docs/WORKER.md §Several
  workers).

Each function runs inside the transaction `PgBatchStore` opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sift.status import JobStatus, TargetStatus
from sift.store import event_rules, rules
from sift.store import series as names
from sift.store.pg import counters, webhooks
from sift.store.pg import events as event_log
from sift.store.pg.db import SUBMIT_LOCK, AfterCommit, Again, Conn, changed, one, rows
from sift.store.pg.notify import JOBS, WORK, notify
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
from sift.store.rules import PENDING as _PENDING
from sift.store.rules import RUNNING as _RUNNING

_JOB_COLS = rules.columns(rules.JOB_COLUMNS)
_LIVE = list(rules.LIVE_STATUSES)  # lists, which the driver sends as arrays (`= any(%s)`)
_REUSABLE = list(rules.REUSABLE_STATUSES)

# The error a target gets when the worker fetching it died (its heartbeat went silent).
WORKER_LOST = "the worker fetching this target stopped (its heartbeat went silent)"
WORKER_LOST_HINT = "retry"

# The database's clock, in epoch seconds: every heartbeat is written and judged by it, so a
# box whose own clock is off can neither look dead nor find a live worker dead
# (docs/WORKER.md §Several workers).
DB_NOW = "extract(epoch from clock_timestamp())::float8"


# -- the sliding lease: every job write sets lease = now (docs/API.md §Job lifetime) ----------


async def _slide_job(conn: Conn, job_id: str, now: float, sets: str = "", args=(), returning=""):
    sets = f"{sets}, lease = %s" if sets else "lease = %s"
    tail = f" returning {returning}" if returning else ""
    return await conn.execute(
        f"update batch_job set {sets} where id = %s{tail}", (*args, now, job_id)
    )


async def touch(conn: Conn, job_id: str, now: float) -> bool:
    return (await _slide_job(conn, job_id, now)).rowcount > 0


async def sweep(conn: Conn, now: float, ttl: float) -> int:
    return await changed(conn, f"delete from batch_job where {rules.expired_sql('%s')}", (ttl, now))


# -- reads --------------------------------------------------------------------------------------


async def get_job(conn: Conn, job_id: str, *, lock: str = "") -> Job | None:
    row = await one(conn, f"select {_JOB_COLS} from batch_job where id = %s {lock}", (job_id,))
    return Job(*row) if row else None


async def get_targets(conn: Conn, job_id: str, *, results: bool = True) -> list[TargetRow]:
    cols = rules.columns(rules.TARGET_COLUMNS, results=results)
    found = await rows(
        conn, f"select {cols} from batch_target where job_id = %s order by idx", (job_id,)
    )
    return [TargetRow(*r) for r in found]


# A job's retry links, as two more columns of the status statement.
_LINKS = (
    ", j.retry_of, array(select r.id from batch_job r where r.retry_of = j.id "
    "order by r.created_at, r.seq)"
)

# With a page: each result's bytes counted from the page's first target, as a running total in
# idx order; a result is in the page when the total up to it stays within the page (or it is the
# first). The window runs over sizes only (octet_length reads no TOASTed value).
_PAGED_TARGETS = (
    "(select t.*, r.own, r.upto from batch_target t join (select idx, own, "
    "sum(own) over (order by idx) as upto from (select idx, case when idx >= %(first)s "
    "then coalesce(octet_length(result), 0) else 0 end as own from batch_target "
    "where job_id = %(id)s) s) r on r.idx = t.idx where t.job_id = %(id)s)"
)
_PAGED_RESULT = (
    "case when t.idx >= %(first)s and (t.upto = t.own or t.upto <= %(max)s) then t.result end"
)


async def status(
    conn: Conn,
    job_id: str,
    results: bool,
    page: ResultPage | None = None,
    *,
    links: bool = False,
) -> tuple | None:
    """The job and its targets (with `links`, then its retry links: `retry_of`, `retries`)
    from one statement, so from one snapshot without a transaction (one round trip: the
    API's most frequent read); with `page`, only that page's results."""
    paged = results and page is not None
    tcols = rules.columns(rules.TARGET_COLUMNS, "t.", results=results)
    if paged:
        tcols = tcols.replace("t.result", _PAGED_RESULT)
    jcols = rules.columns(rules.JOB_COLUMNS, "j.")
    targets = _PAGED_TARGETS if paged else "batch_target"
    args = {
        "id": job_id,
        "first": page.first if paged else 0,
        "max": page.max_bytes if paged else 0,
    }
    found = await rows(
        conn,
        f"select {jcols}{_LINKS if links else ''}, {tcols} from batch_job j "
        f"left join {targets} t on t.job_id = j.id where j.id = %(id)s order by t.idx",
        args,
    )
    if not found:
        return None
    n = len(Job._fields)
    m = n + 2 if links else n
    targets = [TargetRow(*r[m:]) for r in found if r[m] is not None]
    return Job(*found[0][:n]), targets, *found[0][n:m]


async def count_live(conn: Conn, caller: str | None = None, caller_class: str | None = None) -> int:
    """Live jobs in total, or of one caller (its owner string and, when given, its class)."""
    mine, total = await _live_counts(conn, caller or "", caller_class)
    return total if caller is None else mine


async def _live_counts(conn: Conn, caller: str, caller_class: str | None) -> tuple[int, int]:
    """(live jobs of `caller` (of its class, when given), live jobs in total), one statement."""
    return await one(
        conn,
        "select count(*) filter (where caller = %s and (%s::text is null or caller_class = %s)), "
        "count(*) from batch_job where status = any(%s)",
        (caller, caller_class, caller_class, _LIVE),
    )


async def live_owners(conn: Conn) -> list[tuple[str, str, str]]:
    found = await rows(
        conn,
        "select id, caller, caller_class from batch_job where status = any(%s) order by seq",
        (_LIVE,),
    )
    return [(r[0], r[1], r[2]) for r in found]


async def live_jobs(conn: Conn) -> list[str]:
    return [job for job, _, _ in await live_owners(conn)]


async def terminal_among(conn: Conn, job_ids: Sequence[str]) -> list[str]:
    found = await rows(
        conn,
        "select id from batch_job where id = any(%s) and status = any(%s)",
        (list(job_ids), _LIVE),
    )
    live = {r[0] for r in found}
    return [j for j in job_ids if j not in live]


async def gauges(conn: Conn) -> tuple[int, int]:
    row = await one(conn, "select count(*) from batch_target where status = %s", (_RUNNING,))
    return await count_live(conn), row[0]


# -- submit, cancel ------------------------------------------------------------------------


async def _find_reusable(conn, caller, idem_key, now, ttl) -> Job | None:
    row = await one(
        conn,
        f"select {_JOB_COLS} from batch_job where caller = %s and idem_key = %s "
        f"and {rules.unexpired_sql('%s')} and status = any(%s) "
        "order by created_at desc, seq desc limit 1",
        (caller, idem_key, ttl, now, _REUSABLE),
    )
    return Job(*row) if row else None


async def reuse(conn: Conn, caller: str, idem_key: str, now: float, ttl: float):
    """Submit's first step on its own, in one statement: the caller's reusable job for this
    list, counted as reused when there is one (most resubmits end here, without a
    transaction or the submit lock)."""
    row = await one(
        conn,
        f"with found as (select {_JOB_COLS} from batch_job where caller = %s and idem_key = %s "
        f"  and {rules.unexpired_sql('%s')} and status = any(%s) "
        "  order by created_at desc, seq desc limit 1), "
        "bumped as (insert into counter(name, label, value) select %s, 'reused', 1 from found "
        "  on conflict (name, label) do update set value = counter.value + excluded.value) "
        "select * from found",
        (caller, idem_key, ttl, now, _REUSABLE, names.JOBS_TOTAL),
    )
    return SubmitOutcome("reused", Job(*row)) if row else None


async def _insert_job(conn: Conn, job: NewJob, now: float) -> tuple:
    """The job row with its targets, in one statement."""
    return await one(
        conn,
        "with j as (insert into batch_job(id, caller, caller_class, idem_key, status, "
        "  targets_total, created_at, lease, retry_of) values (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
        f"  returning {_JOB_COLS}), "
        "t as (insert into batch_target(job_id, idx, url, options, status) "
        "  select j.id, u.idx - 1, u.url, u.options, %s from j, "
        "  unnest(%s::text[], %s::text[]) with ordinality as u(url, options, idx)) "
        f"select *, pg_notify('{WORK}', id) from j",
        (job.id, job.caller, job.caller_class, job.idem_key, rules.QUEUED, len(job.targets),
         now, now, job.retry_of, _PENDING, [t.url for t in job.targets],
         [t.options for t in job.targets]),
    )  # fmt: skip


async def submit(
    conn: Conn,
    job: NewJob,
    caps: Caps,
    now: float,
    ttl: float,
    fresh: bool = False,
    webhook: tuple | None = None,  # (url, event types, results)
) -> SubmitOutcome:
    """Idempotency, caps, insert and sweep, in the order docs/API.md §POST /v1/batch gives,
    under the submit lock (`PgBatchStore.submit` tries `reuse` first, without it). `fresh`
    skips the reuse: the new job is then the one a later plain submit reuses."""
    await conn.execute("select pg_advisory_xact_lock(%s)", (SUBMIT_LOCK,))
    existing = None if fresh else await _find_reusable(conn, job.caller, job.idem_key, now, ttl)
    if existing is not None:
        await counters.bump(conn, names.JOBS_TOTAL, "reused")
        return SubmitOutcome("reused", existing)
    mine, total = await _live_counts(conn, job.caller, job.caller_class)
    refusal = rules.submit_refusal(job, caps, mine, total)
    if refusal == "caller_busy":
        live = await one(
            conn,
            "select id from batch_job where caller = %s and caller_class = %s "
            "and status = any(%s) order by created_at, seq limit 1",
            (job.caller, job.caller_class, _LIVE),
        )
        return SubmitOutcome(refusal, live_job=live[0] if live else None)
    if refusal is not None:
        return SubmitOutcome(refusal)
    row = await _insert_job(conn, job, now)
    if webhook is not None:  # webhooks (docs/API.md §Webhooks)
        await webhooks.set_webhook(conn, job.id, *webhook)
    await counters.bump(conn, names.JOBS_TOTAL, "created")
    await sweep(conn, now, ttl)
    return SubmitOutcome("created", Job(*row[:-1]))


async def cancel(conn: Conn, job_id: str, now: float) -> Job | None:
    job = await get_job(conn, job_id, lock="for update")
    if job is not None and job.status in _LIVE:
        await _slide_job(conn, job_id, now, "status = %s", (str(JobStatus.CANCELLED),))
        await counters.bump(conn, names.JOBS_TOTAL, "cancelled")
        await event_log.record_end(  # event log (docs/API.md §Events)
            conn, job_id, now, str(JobStatus.CANCELLED), job.error, job.targets_total,
            job.targets_done,
        )  # fmt: skip
        await notify(conn, WORK, job_id)
        await notify(conn, JOBS, job_id)
    return job


# -- the drain: claim, requeue, finish -------------------------------------------------------


# A claim in one statement: the job, row-locked (`SKIP LOCKED`: a job another worker is claiming
# or storing this instant is passed over), with its first running-or-pending target; that
# target taken only when the job is live, nothing of it is in flight and its retry time has
# come (the lowest pending target only: a job stays serial even while that target waits to
# retry after "busy"); the job's status and lease; and `job.running` at a job's first claim.
# The target's update re-checks `pending` on the row's latest version, so a claim another worker
# committed after this statement's snapshot makes this one take nothing. A claim chained to a
# quick store takes nothing unless that store stored its target in this transaction (the
# transaction-local setting `sift.stored`): a claim is never committed apart from its store.
_FIRST_CLAIM = "(select c.id from c join moved m on m.id = c.id where c.first)"
_CLAIM = (
    "with c as (select j.id, j.status = %s as first, j.status = any(%s) as live, j.caller, "
    "  j.caller_class, t.idx, t.url, t.options, t.busy_since, t.retry_at, t.status "
    "  from batch_job j left join lateral ("
    "    select idx, url, options, busy_since, retry_at, status from batch_target"
    "    where job_id = j.id and status in (%s, %s) order by status = %s desc, idx limit 1"
    "  ) t on true where j.id = %s and (%s or current_setting('sift.stored', true) = 'y') "
    "  for update of j skip locked), "
    "taken as (update batch_target b set status = %s, started_at = %s, worker = %s from c "
    "  where b.job_id = c.id and b.idx = c.idx and b.status = %s and c.live and c.status = %s "
    "  and (c.retry_at is null or c.retry_at <= %s) returning b.job_id), "
    "moved as (update batch_job set status = case when status = %s then %s else status end, "
    "  started_at = case when status = %s then %s else started_at end, lease = %s "
    "  where id = (select job_id from taken) returning id), "
    f"{event_log.append_ctes('ran', _FIRST_CLAIM)} "
    "select c.caller, c.caller_class, c.idx, c.url, c.options, c.busy_since "
    "from c join moved m on m.id = c.id"
)


async def _send_claim(
    conn: Conn, job_id: str, now: float, worker: str | None, *, after_store: bool = False
):
    """The claim's statement, sent (`after_store`: only if the quick store before it in this
    transaction stored its target); `_claimed` reads its answer."""
    queued = str(JobStatus.QUEUED)
    running = event_rules.running_data()
    return await conn.execute(
        _CLAIM,
        (queued, _LIVE, _PENDING, _RUNNING, _RUNNING, job_id, not after_store,
         _RUNNING, now, worker, _PENDING, _PENDING, now,
         queued, str(JobStatus.RUNNING), queued, now, now,
         *event_log.append_args(event_rules.JOB_RUNNING, None, now, running, running)),
    )  # fmt: skip


async def _claimed(cur, job_id: str) -> Claim | None:
    row = await cur.fetchone()
    return Claim(job_id, row[2], row[3], row[4], row[0], row[1], row[5]) if row else None


async def claim(conn: Conn, job_id: str, now: float, worker: str | None) -> AfterCommit:
    """Take the job's next ready target (see `_CLAIM`): one statement, its answer read after
    COMMIT, so a pipelined claim is one round trip."""
    cur = await _send_claim(conn, job_id, now, worker)
    return AfterCommit(lambda: _claimed(cur, job_id))


async def requeue(
    conn: Conn,
    job_id: str,
    idx: int,
    *,
    retry_at: float,
    busy_since: float | None,
    now: float,
    reason: str | None = None,
) -> bool:
    """A target goes back to `pending`, to be tried again at `retry_at`; `reason` says why it
    waits (docs/API.md §Waiting targets)."""
    if await get_job(conn, job_id, lock="for update") is None:
        return False
    n = await changed(
        conn,
        "update batch_target set status = %s, retry_at = %s, busy_since = %s, worker = null "
        "where job_id = %s and idx = %s and status = %s",
        (_PENDING, retry_at, busy_since, job_id, idx, _RUNNING),
    )
    if n:
        await conn.execute("delete from target_wait where job_id = %s and idx = %s", (job_id, idx))
        if reason:
            await conn.execute(
                "insert into target_wait(job_id, idx, reason) values (%s, %s, %s)",
                (job_id, idx, reason),
            )
        await _slide_job(conn, job_id, now)
    return n > 0


async def _store_target(conn: Conn, job_id: str, idx: int, fetched: Fetched, now: float):
    """Rewrite a running target with its outcome and count it into its job, in one statement
    (the job's row locked first, as everywhere): the job's status, counts, creation time,
    failed targets and every job's bytes (the byte budget's total) after it, or None when the
    target is not running (or is gone)."""
    kept = rules.stored(fetched)
    row = await one(
        conn,
        "with j as (select id from batch_job where id = %s for update), "
        "t as (update batch_target set status = %s, result = %s, error = %s, hint = %s, "
        "  retry_at = null, retryable = %s, retry_after = %s "
        "  where job_id = (select id from j) and idx = %s and status = %s returning 1) "
        "update batch_job set targets_done = targets_done + %s, nbytes = nbytes + %s, "
        "lease = %s where id = %s and exists (select 1 from t) "
        "returning status, targets_done, targets_total, created_at, "
        "(select count(*) from batch_target where job_id = %s and status = %s), "
        "(select coalesce(sum(nbytes), 0) from batch_job)",
        (job_id, fetched.status, kept.result, kept.error, kept.hint,
         None if kept.retryable is None else bool(kept.retryable), kept.retry_after, idx,
         _RUNNING, kept.done, kept.nbytes, now, job_id, job_id, str(TargetStatus.FAILED)),
    )  # fmt: skip
    if row is None:
        return None
    # The count and the sum were read before this statement's own update.
    return (*row[:4], row[4] + (fetched.status == TargetStatus.FAILED), row[5] + kept.nbytes)


async def _evict_oldest(
    conn: Conn, max_bytes: int, for_job: str | None = None, total: int | None = None
) -> int:
    """Remove the finished jobs `rules.eviction_victims` names (docs/WORKER.md §Byte budget);
    `total`: every job's bytes, when the caller's statement read them already."""
    if total is None:
        total = (await one(conn, "select coalesce(sum(nbytes), 0) from batch_job"))[0]
    if total <= max_bytes:
        return 0
    found = await rows(
        conn,
        "select id, caller, caller_class, nbytes, status <> all(%s) from batch_job "
        "order by lease, seq",
        (_LIVE,),
    )
    jobs = [rules.Held(j, (o, k), n, ended) for j, o, k, n, ended in found]
    victims = rules.eviction_victims(jobs, max_bytes, for_job)
    await conn.execute("delete from batch_job where id = any(%s)", (victims,))
    return len(victims)


async def finish(
    conn: Conn,
    job_id: str,
    idx: int,
    fetched: Fetched,
    now: float,
    max_bytes: int | None = None,
    then_claim: Sequence[str] = (),
    worker: str | None = None,
) -> AfterCommit:
    """Store a fetched target, count it, set the job's terminal status exactly once, keep
    the byte budget, and claim the next target (recording `worker`).

    Usually one transaction of two statements whose answers are read after COMMIT (pipelined:
    one round trip): the store with its event and counters (`_store_quick`), then the claim of
    the first of `then_claim`. The store holds back when it would end the job or go over the
    byte budget, or when the target is not running, and the claim then takes nothing, so the
    transaction either stored the target (and maybe claimed) or changed nothing; a second
    transaction then stores it the long way (terminal status, eviction) with the claims
    still to try. A retry after a failed second transaction so never leaves a committed claim
    that no one fetches."""
    quick = await _store_quick(conn, job_id, idx, fetched, now, max_bytes)
    first = None
    if then_claim:
        first = await _send_claim(conn, then_claim[0], now, worker, after_store=True)

    async def read():
        stored = (await quick.fetchone())[0] > 0
        claimed = await _claimed(first, then_claim[0]) if first is not None else None
        # Still to try: none once one took a target; after a stored target, the first job
        # was asked with it stored; else the store may free the first job too.
        then = () if claimed is not None else then_claim[1:] if stored else then_claim
        if stored and not then:
            return Finished(True, next=claimed)
        return Again(lambda c: _finish_rest(c, job_id, idx, fetched, now, max_bytes, then,
                                            worker, stored, claimed))  # fmt: skip

    return AfterCommit(read)


async def _store_quick(
    conn: Conn, job_id: str, idx: int, fetched: Fetched, now: float, max_bytes: int | None
):
    """A running target stored with its count, event and counters in one statement (the
    job's row locked first, as everywhere), unless it is the job's last or its result would
    take every job's bytes over `max_bytes`: the cursor's one row counts the stored (0 or 1)."""
    kept = rules.stored(fetched)
    budget = max_bytes if fetched.result is not None else None
    failure = (fetched.error, fetched.hint, fetched.retryable, fetched.retry_after)
    event = event_log.target_event(idx, fetched.status, fetched.outcome, fetched.result, failure)
    bumps, bump_args = counters.bump_cte(
        "counted", counters.merged(rules.stored_rows(fetched)), "exists (select 1 from u)"
    )
    appended, append_args = "", ()
    if event is not None:
        kind, data, redacted = event
        appended = event_log.append_ctes("ev", "(select id from u where live)") + ", "
        append_args = event_log.append_args(kind, idx, now, data, redacted)
    return await conn.execute(
        "with j as (select id, status, targets_done, targets_total from batch_job "
        "  where id = %s for update), "
        "ok as (select id from j where (status <> all(%s) or targets_done + %s < targets_total) "
        "  and (%s::float8 is null "
        "  or (select coalesce(sum(nbytes), 0) from batch_job) + %s <= %s::float8)), "
        "t as (update batch_target set status = %s, result = %s, error = %s, hint = %s, "
        "  retry_at = null, retryable = %s, retry_after = %s "
        "  where job_id = (select id from ok) and idx = %s and status = %s returning 1), "
        "u as (update batch_job set targets_done = targets_done + %s, nbytes = nbytes + %s, "
        "  lease = %s where id = (select id from ok) and exists (select 1 from t) "
        "  returning id, status = any(%s) as live), "
        f"{appended}{bumps} select count(*), "
        "set_config('sift.stored', case when count(*) > 0 then 'y' else 'n' end, true) from u",
        (job_id, _LIVE, kept.done, budget, kept.nbytes, budget, fetched.status, kept.result,
         kept.error, kept.hint, None if kept.retryable is None else bool(kept.retryable),
         kept.retry_after, idx, _RUNNING, kept.done, kept.nbytes, now, _LIVE, *append_args,
         *bump_args),
    )  # fmt: skip


async def _finish_rest(
    conn: Conn,
    job_id: str,
    idx: int,
    fetched: Fetched,
    now: float,
    max_bytes: int | None,
    then_claim: Sequence[str],
    worker: str | None,
    stored: bool,
    claimed: Claim | None,
) -> Finished | AfterCommit:
    """What the quick store held back: the target stored the long way unless it was stored,
    then the claims still to try, the first that takes a target wins (its answer read after
    COMMIT, so each is in this transaction)."""
    finished = Finished(True, next=claimed)
    if not stored:
        finished, held = await _finish_target(conn, job_id, idx, fetched, now)
        if finished.stored and fetched.result is not None and max_bytes is not None:
            evicted = await _evict_oldest(conn, max_bytes, job_id, held)
            finished = replace(finished, evicted=evicted)
        finished = replace(finished, next=claimed)
    for next_job in then_claim:
        if next_job == job_id and finished.terminal is not None:
            continue  # it has just ended: nothing to claim
        taken = await _claimed(await _send_claim(conn, next_job, now, worker), next_job)
        if taken is not None:
            return replace(finished, next=taken)
    return finished


async def _finish_target(
    conn: Conn, job_id: str, idx: int, fetched: Fetched, now: float
) -> tuple[Finished, int | None]:
    """The target stored, and every job's bytes after it (None when it was not stored)."""
    job = await _store_target(conn, job_id, idx, fetched, now)
    if job is None:
        return Finished(False), None
    job_status, done, total, created_at, failed, held = job
    failure = (fetched.error, fetched.hint, fetched.retryable, fetched.retry_after)
    await event_log.record_target(  # event log (docs/API.md §Events)
        conn, job_id, idx, fetched.status, fetched.outcome, now, job_status, fetched.result, failure
    )
    bumps = rules.stored_rows(fetched)
    if job_status not in _LIVE or done < total:
        await counters.bump_many(conn, bumps)
        return Finished(True), held
    terminal = rules.terminal_status(failed, total)
    await _slide_job(
        conn, job_id, now, "status = %s", (terminal,), returning=f"pg_notify('{JOBS}', id)"
    )
    await event_log.record_end(conn, job_id, now, terminal, "", total, done, failed)  # event log
    await counters.bump_many(conn, bumps + rules.terminal_rows(terminal, now - created_at))
    return Finished(True, terminal), held


# -- workers: heartbeats and the restart rule (docs/WORKER.md §Several workers) ---------------


async def beat(conn: Conn, worker: str, host: str, pid: int, started_at: float) -> None:
    await conn.execute(
        "insert into worker_beat(id, host, pid, started_at, heartbeat) "
        f"values (%s, %s, %s, %s, {DB_NOW}) "
        "on conflict (id) do update set heartbeat = excluded.heartbeat",
        (worker, host, pid, started_at),
    )


async def leave(conn: Conn, worker: str) -> None:
    await conn.execute("delete from worker_beat where id = %s", (worker,))


async def newest_beat(conn: Conn, now: float) -> tuple | None:
    """The newest heartbeat, its time told on the caller's clock (`now` less its age by the
    database's clock)."""
    return await one(
        conn,
        f"select pid, started_at, %s - ({DB_NOW} - heartbeat) from worker_beat "
        "order by heartbeat desc limit 1",
        (now,),
    )


_SILENT = (
    "not exists (select 1 from worker_beat w where w.id = t.worker "
    f"and w.heartbeat + %s > {DB_NOW})"
)


async def live_workers(conn: Conn, dead_after: float) -> int:
    """Workers that beat within `dead_after`, by the database's clock (docs/OPERATIONS.md
    §Health)."""
    row = await one(
        conn, f"select count(*) from worker_beat where heartbeat > {DB_NOW} - %s", (dead_after,)
    )
    return int(row[0]) if row else 0


async def lost_targets(conn: Conn, dead_after: float) -> list[tuple[str, int]]:
    """Targets in flight on no live worker: their worker went silent (or it left)."""
    found = await rows(
        conn,
        f"select t.job_id, t.idx from batch_target t where t.status = %s and {_SILENT}",
        (_RUNNING, dead_after),
    )
    return [(r[0], r[1]) for r in found]


async def fail_lost(conn: Conn, job_id: str, idx: int, now: float, dead_after: float) -> Finished:
    """Fail one target found by `lost_targets`, re-checked under its job's lock: its worker
    may have stored it (or beaten) in between."""
    if await get_job(conn, job_id, lock="for update") is None:
        return Finished(False)
    still = await one(
        conn,
        "select 1 from batch_target t where t.job_id = %s and t.idx = %s and t.status = %s "
        f"and {_SILENT}",
        (job_id, idx, _RUNNING, dead_after),
    )
    if still is None:
        return Finished(False)
    lost = Fetched(
        str(TargetStatus.FAILED), "restart", 0.0, None, WORKER_LOST, WORKER_LOST_HINT, True
    )
    return (await _finish_target(conn, job_id, idx, lost, now))[0]


async def forget_dead(conn: Conn, dead_after: float) -> int:
    return await changed(
        conn, f"delete from worker_beat where heartbeat + %s <= {DB_NOW}", (dead_after,)
    )
