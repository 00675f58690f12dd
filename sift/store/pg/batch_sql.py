"""The batch tables' SQL for PostgreSQL: one named query per store operation.

The same operations, arguments and answers as `sift.store.batch_sql` (the SQLite engine), and
the same rules (docs/WORKER.md §The store's transactions); what differs is how a rule is kept
when several processes on several boxes write at once:

* a job's row lock serialises everything done to one job: `claim` takes it with
  `FOR UPDATE SKIP LOCKED` (a job another worker is claiming or storing right now is skipped,
  as if it had a target in flight), `finish`, `requeue` and `cancel` wait for it;
* submits take one transaction-level advisory lock, since the caps count live jobs across every
  box; a partial unique index keeps one live job per (caller, list) whatever happens
  (`INSERT … ON CONFLICT DO NOTHING`, then the winner's job is reused);
* a claimed target records the worker holding it (kept once stored: who fetched it), so `reap`
  fails only targets in flight on a worker whose lease expired (docs/WORKER.md §Several
  workers).

Each function runs inside the transaction `PgBatchStore` opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sift.constants import BYTES_BUCKETS, SECONDS_BUCKETS
from sift.status import FINISHED, LIVE, REUSABLE, JobStatus, TargetStatus
from sift.store import counters as names
from sift.store.pg import counters
from sift.store.pg.db import SUBMIT_LOCK, Conn, changed, one, rows
from sift.store.pg.notify import JOBS, WORK, notify
from sift.store.records import Claim, Finished, Job, NewTarget, SubmitOutcome, TargetRow

_JOB_COLS = (
    "id, caller, caller_class, idem_key, status, error, targets_total, targets_done, "
    "created_at, lease, nbytes, started_at"
)
_TARGET_COLS = (
    "job_id, idx, url, options, status, result, error, hint, retry_at, busy_since, "
    "retryable, retry_after"
)
_LIVE = [str(s) for s in LIVE]
_REUSABLE = [str(s) for s in REUSABLE]
_RUNNING, _PENDING = str(TargetStatus.RUNNING), str(TargetStatus.PENDING)

# The error a target gets when the worker fetching it died (its lease expired).
LEASE_LOST = "the worker fetching this target stopped (its lease expired)"
LEASE_LOST_HINT = "retry"


def _nbytes(text: str | None) -> int:
    return len(text.encode()) if text else 0


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
    return await changed(conn, "delete from batch_job where lease + %s <= %s", (ttl, now))


# -- reads --------------------------------------------------------------------------------------


async def get_job(conn: Conn, job_id: str, *, lock: str = "") -> Job | None:
    row = await one(conn, f"select {_JOB_COLS} from batch_job where id = %s {lock}", (job_id,))
    return Job(*row) if row else None


async def get_targets(conn: Conn, job_id: str, *, results: bool = True) -> list[TargetRow]:
    cols = _TARGET_COLS if results else _TARGET_COLS.replace("result,", "null,")
    found = await rows(
        conn, f"select {cols} from batch_target where job_id = %s order by idx", (job_id,)
    )
    return [TargetRow(*r) for r in found]


async def status(conn: Conn, job_id: str, results: bool) -> tuple[Job, list[TargetRow]] | None:
    """The job and its targets from one statement, so from one snapshot without a
    transaction (one round trip: the API's most frequent read)."""
    tcols = ", ".join(
        f"t.{c}" if c != "result" or results else "null"
        for c in _TARGET_COLS.replace(" ", "").split(",")
    )
    jcols = ", ".join(f"j.{c}" for c in _JOB_COLS.replace(" ", "").split(","))
    found = await rows(
        conn,
        f"select {jcols}, {tcols} from batch_job j left join batch_target t on t.job_id = j.id "
        "where j.id = %s order by t.idx",
        (job_id,),
    )
    if not found:
        return None
    n = len(Job._fields)
    targets = [TargetRow(*r[n:]) for r in found if r[n] is not None]
    return Job(*found[0][:n]), targets


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
        "and lease + %s > %s and status = any(%s) order by created_at desc, seq desc limit 1",
        (caller, idem_key, ttl, now, _REUSABLE),
    )
    return Job(*row) if row else None


async def reuse(conn: Conn, *, caller: str, idem_key: str, now: float, ttl: float, **_):
    """Submit's first step on its own, in one statement: the caller's reusable job for this
    list, counted as reused when there is one (most resubmits end here, without a
    transaction or the submit lock)."""
    row = await one(
        conn,
        f"with found as (select {_JOB_COLS} from batch_job where caller = %s and idem_key = %s "
        "  and lease + %s > %s and status = any(%s) order by created_at desc, seq desc limit 1), "
        "bumped as (insert into counter(name, label, value) select %s, 'reused', 1 from found "
        "  on conflict (name, label) do update set value = counter.value + excluded.value) "
        "select * from found",
        (caller, idem_key, ttl, now, _REUSABLE, names.JOBS_TOTAL),
    )
    return SubmitOutcome("reused", Job(*row)) if row else None


async def _insert_job(
    conn, job_id, caller, caller_class, idem_key, targets, now, retry_of=None
) -> tuple | None:
    """The job row with its targets, in one statement, or None when a live job already holds
    (caller, list): the unique index."""
    return await one(
        conn,
        "with j as (insert into batch_job(id, caller, caller_class, idem_key, status, "
        "  targets_total, created_at, lease, retry_of) values (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
        f"  on conflict do nothing returning {_JOB_COLS}), "
        "t as (insert into batch_target(job_id, idx, url, options, status) "
        "  select j.id, u.idx - 1, u.url, u.options, %s from j, "
        "  unnest(%s::text[], %s::text[]) with ordinality as u(url, options, idx)) "
        f"select *, pg_notify('{WORK}', id) from j",
        (job_id, caller, caller_class, idem_key, str(JobStatus.QUEUED), len(targets), now, now,
         retry_of, _PENDING, [t.url for t in targets], [t.options for t in targets]),
    )  # fmt: skip


async def submit(
    conn: Conn,
    *,
    job_id: str,
    caller: str,
    caller_class: str,
    idem_key: str,
    targets: Sequence[NewTarget],
    now: float,
    ttl: float,
    targets_per_job: int,
    jobs_per_caller: int,
    jobs_total: int,
    fresh: bool = False,
    retry_of: str | None = None,
) -> SubmitOutcome:
    """Idempotency, caps, insert and sweep, in the order docs/API.md §POST /v1/batch gives,
    under the submit lock (`PgBatchStore.submit` tries `reuse` first, without it). `fresh`
    skips the reuse of an ended job; a live job of the same list is still the one job (the
    unique index's rule on this engine)."""
    await conn.execute("select pg_advisory_xact_lock(%s)", (SUBMIT_LOCK,))
    existing = None if fresh else await _find_reusable(conn, caller, idem_key, now, ttl)
    if existing is not None:
        await counters.bump(conn, names.JOBS_TOTAL, "reused")
        return SubmitOutcome("reused", existing)
    if len(targets) > targets_per_job:
        return SubmitOutcome("too_many")
    mine, total = await _live_counts(conn, caller, caller_class)
    if mine >= jobs_per_caller:
        live = await one(
            conn,
            "select id from batch_job where caller = %s and caller_class = %s "
            "and status = any(%s) order by created_at, seq limit 1",
            (caller, caller_class, _LIVE),
        )
        return SubmitOutcome("caller_busy", live_job=live[0] if live else None)
    if total >= jobs_total:
        return SubmitOutcome("jobs_busy")
    row = await _insert_job(conn, job_id, caller, caller_class, idem_key, targets, now, retry_of)
    if row is None:
        # The list's key is held by a live job the lookup passed over: one whose lease has
        # run out but which is not swept yet. Sweep first (it is gone for readers already).
        await sweep(conn, now, ttl)
        row = await _insert_job(
            conn, job_id, caller, caller_class, idem_key, targets, now, retry_of
        )
    if row is None:
        # Still held: a live job the lookup may not reuse. One live job per list is the
        # index's rule, so this submit gets that job, as a reuse.
        held = await one(
            conn,
            f"select {_JOB_COLS} from batch_job where caller = %s and idem_key = %s "
            "and status = any(%s)",
            (caller, idem_key, _LIVE),
        )
        await counters.bump(conn, names.JOBS_TOTAL, "reused")
        return SubmitOutcome("reused", Job(*held))
    await counters.bump(conn, names.JOBS_TOTAL, "created")
    await sweep(conn, now, ttl)
    return SubmitOutcome("created", Job(*row[:-1]))


async def cancel(conn: Conn, job_id: str, now: float) -> Job | None:
    job = await get_job(conn, job_id, lock="for update")
    if job is not None and job.status in _LIVE:
        await _slide_job(conn, job_id, now, "status = %s", (str(JobStatus.CANCELLED),))
        await counters.bump(conn, names.JOBS_TOTAL, "cancelled")
        await notify(conn, WORK, job_id)
        await notify(conn, JOBS, job_id)
    return job


# -- the drain: claim, requeue, finish -------------------------------------------------------


async def claim(conn: Conn, job_id: str, now: float, worker: str | None) -> Claim | None:
    """Take the job's next ready target, if the job is live, has nothing in flight, and no
    other worker is claiming or storing one of its targets this instant. Two round trips:
    the job (row-locked) with its first running-or-pending target, then the writes."""
    row = await one(
        conn,
        "select j.status, j.caller, j.caller_class, t.idx, t.url, t.options, t.busy_since, "
        "t.retry_at, t.status from batch_job j left join lateral ("
        "  select idx, url, options, busy_since, retry_at, status from batch_target"
        "  where job_id = j.id and status in (%s, %s) order by status = %s desc, idx limit 1"
        ") t on true where j.id = %s for update of j skip locked",
        (_PENDING, _RUNNING, _RUNNING, job_id),
    )
    # The lowest pending target only, and none while one is running: a job stays serial
    # even while that target waits to retry after "busy".
    if row is None or row[0] not in _LIVE or row[3] is None:
        return None
    _, caller, caller_class, idx, url, options, busy_since, retry_at, status = row
    if status == _RUNNING or (retry_at is not None and retry_at > now):
        return None
    # The target is re-checked as the update takes its row: the read above may predate a
    # claim another worker committed just before this one locked the job.
    queued = str(JobStatus.QUEUED)
    taken = await one(
        conn,
        "with t as (update batch_target set status = %s, started_at = %s, worker = %s "
        "  where job_id = %s and idx = %s and status = %s returning 1) "
        "update batch_job set status = case when status = %s then %s else status end, "
        "started_at = case when status = %s then %s else started_at end, lease = %s "
        "where id = %s and exists (select 1 from t) returning 1",
        (_RUNNING, now, worker, job_id, idx, _PENDING, queued, str(JobStatus.RUNNING), queued,
         now, now, job_id),
    )  # fmt: skip
    if taken is None:
        return None
    return Claim(job_id, idx, url, options, caller, caller_class, busy_since)


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


async def _store_target(conn, job_id, idx, status, now, result, failure):
    """Rewrite a running target with its outcome and count it into its job, in one statement
    (the job's row locked first, as everywhere): the job's status, counts, creation time and
    failed targets after it, or None when the target is not running (or is gone)."""
    finishing = status in FINISHED
    error, hint, retryable, retry_after = failure if finishing else (None, None, None, None)
    row = await one(
        conn,
        "with j as (select id from batch_job where id = %s for update), "
        "t as (update batch_target set status = %s, result = %s, error = %s, hint = %s, "
        "  retry_at = null, retryable = %s, retry_after = %s "
        "  where job_id = (select id from j) and idx = %s and status = %s returning 1) "
        "update batch_job set targets_done = targets_done + %s, nbytes = nbytes + %s, "
        "lease = %s where id = %s and exists (select 1 from t) "
        "returning status, targets_done, targets_total, created_at, "
        "(select count(*) from batch_target where job_id = %s and status = %s)",
        (
            job_id,
            status,
            result if finishing else None,
            error,
            hint,
            None if retryable is None else bool(retryable),
            retry_after if retryable else None,
            idx,
            _RUNNING,
            int(finishing),
            _nbytes(result) if finishing else 0,
            now,
            job_id,
            job_id,
            str(TargetStatus.FAILED),
        ),
    )
    if row is None:
        return None
    # The count was read before this statement's own update.
    return (*row[:4], row[4] + (status == TargetStatus.FAILED))


def _terminal(failed: int, total: int) -> str:
    if failed == total:
        return str(JobStatus.FAILED)
    return str(JobStatus.DONE if failed == 0 else JobStatus.PARTIAL)


async def _evict_oldest(conn: Conn, max_bytes: int, for_job: str | None = None) -> int:
    """Remove whole finished jobs until batch bytes fit the budget; never a live job.

    The rule of `sift.store.batch_sql._evict_oldest` (docs/WORKER.md §Byte budget): the owner
    of `for_job` pays first with its own oldest finished jobs, then only callers over an equal
    share lose theirs. The job rows are read once, with each owner's total and the payer.
    """
    total = (await one(conn, "select coalesce(sum(nbytes), 0) from batch_job"))[0]
    if total <= max_bytes:
        return 0
    jobs = await rows(
        conn,
        "select id, caller, caller_class, nbytes, status <> all(%s) from batch_job "
        "order by lease, seq",
        (_LIVE,),
    )
    held: dict[tuple[str, str], int] = {}
    payer = None
    for job_id, owner, klass, nbytes, _ in jobs:
        held[(owner, klass)] = held.get((owner, klass), 0) + nbytes
        if job_id == for_job:
            payer = (owner, klass)
    share = max_bytes / max(1, sum(1 for n in held.values() if n > 0))
    finished = [(j, (o, k), n) for j, o, k, n, ended in jobs if ended]
    victims: list[str] = []
    for job_id, owner, nbytes in finished:  # the payer's own first
        if total <= max_bytes:
            break
        if owner == payer and job_id != for_job:
            victims.append(job_id)
            total -= nbytes
            held[owner] -= nbytes
    for job_id, owner, nbytes in finished:  # then whoever is over an equal share
        if total <= max_bytes:
            break
        if job_id in victims or held[owner] <= share:
            continue
        victims.append(job_id)
        total -= nbytes
        held[owner] -= nbytes
    await conn.execute("delete from batch_job where id = any(%s)", (victims,))
    return len(victims)


async def finish(
    conn: Conn,
    job_id: str,
    idx: int,
    *,
    now: float,
    max_bytes: int | None = None,
    then_claim: Sequence[str] = (),
    worker: str | None = None,
    **stored,
) -> Finished:
    """`stored`: the target's `status`, `outcome`, `seconds` and optional `result`, `error`,
    `hint`, `retryable`, `retry_after`, as `sift.store.batch.BatchStore.finish` takes them."""
    finished = await _finish_target(conn, job_id, idx, now=now, **stored)
    if finished.stored and stored.get("result") is not None and max_bytes is not None:
        finished = replace(finished, evicted=await _evict_oldest(conn, max_bytes, job_id))
    for next_job in then_claim:
        claimed = await claim(conn, next_job, now, worker)
        if claimed is not None:
            return replace(finished, next=claimed)
    return finished


async def _finish_target(
    conn,
    job_id,
    idx,
    *,
    status,
    outcome,
    seconds,
    now,
    result=None,
    error=None,
    hint=None,
    retryable=False,
    retry_after=None,
):
    failure = (error, hint, retryable, retry_after)
    job = await _store_target(conn, job_id, idx, status, now, result, failure)
    if job is None:
        return Finished(False)
    job_status, done, total, created_at, failed = job
    bumps = [(names.TARGETS_TOTAL, outcome, 1.0)]
    bumps += names.observation(names.TARGET_SECONDS, seconds, SECONDS_BUCKETS)
    if result is not None:
        bumps += names.observation(names.RESULT_BYTES, _nbytes(result), BYTES_BUCKETS)
    if job_status not in _LIVE or done < total:
        await counters.bump_many(conn, bumps)
        return Finished(True)
    terminal = _terminal(failed, total)
    await _slide_job(
        conn, job_id, now, "status = %s", (terminal,), returning=f"pg_notify('{JOBS}', id)"
    )
    bumps.append((names.JOBS_TOTAL, terminal, 1.0))
    bumps += names.observation(names.JOB_SECONDS, now - created_at, SECONDS_BUCKETS)
    await counters.bump_many(conn, bumps)
    return Finished(True, terminal)


# -- workers: leases and the restart rule (docs/WORKER.md §Several workers) -------------------


async def beat(conn: Conn, worker: str, host: str, pid: int, started_at: float, now: float):
    await conn.execute(
        "insert into worker_lease(id, host, pid, started_at, heartbeat) "
        "values (%s, %s, %s, %s, %s) on conflict (id) do update set heartbeat = excluded.heartbeat",
        (worker, host, pid, started_at, now),
    )


async def leave(conn: Conn, worker: str) -> None:
    await conn.execute("delete from worker_lease where id = %s", (worker,))


async def newest_beat(conn: Conn) -> tuple | None:
    return await one(
        conn,
        "select pid, started_at, heartbeat from worker_lease order by heartbeat desc limit 1",
    )


async def live_workers(conn: Conn, since: float) -> int:
    """Workers whose heartbeat is newer than `since` (docs/OPERATIONS.md §Health)."""
    row = await one(conn, "select count(*) from worker_lease where heartbeat > %s", (since,))
    return int(row[0]) if row else 0


async def lost_targets(conn: Conn, now: float, lease: float) -> list[tuple[str, int]]:
    """Targets in flight on no live worker: their worker's lease expired (or it left)."""
    return [
        (r[0], r[1])
        for r in await rows(
            conn,
            "select t.job_id, t.idx from batch_target t where t.status = %s and not exists "
            "(select 1 from worker_lease w where w.id = t.worker and w.heartbeat + %s > %s)",
            (_RUNNING, lease, now),
        )
    ]


async def fail_lost(conn: Conn, job_id: str, idx: int, now: float, lease: float) -> Finished:
    """Fail one target found by `lost_targets`, re-checked under its job's lock: its worker
    may have stored it (or beaten) in between."""
    if await get_job(conn, job_id, lock="for update") is None:
        return Finished(False)
    still = await one(
        conn,
        "select 1 from batch_target t where t.job_id = %s and t.idx = %s and t.status = %s "
        "and not exists (select 1 from worker_lease w where w.id = t.worker "
        "and w.heartbeat + %s > %s)",
        (job_id, idx, _RUNNING, lease, now),
    )
    if still is None:
        return Finished(False)
    return await _finish_target(
        conn, job_id, idx, status=str(TargetStatus.FAILED), outcome="restart", seconds=0.0,
        now=now, error=LEASE_LOST, hint=LEASE_LOST_HINT, retryable=True,
    )  # fmt: skip


async def forget_dead(conn: Conn, now: float, lease: float) -> int:
    return await changed(conn, "delete from worker_lease where heartbeat + %s <= %s", (lease, now))
