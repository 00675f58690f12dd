"""The store's rules that do not depend on the engine, in one place.

Both engines (`sift.store.batch_sql` on SQLite, `sift.store.pg.batch_sql` on PostgreSQL) keep
only their transactions, locks and SQL dialect, and take every decision below from here: the
columns a job and a target are read with, which statuses are live, the sliding lease and when
a job expires, the order of submit's refusals, what a stored target records, a job's terminal
status, the counter rows an event bumps, and which finished jobs the byte budget evicts
(docs/WORKER.md §The store's transactions, docs/API.md §Job lifetime). Pure functions and
data: tested without a database, and by the contract suite on both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sift.constants import BYTES_BUCKETS, SECONDS_BUCKETS
from sift.status import FINISHED, LIVE, REUSABLE, JobStatus, TargetStatus
from sift.store import series
from sift.store.records import Caps, Fetched, Job, ListPosition, NewJob

# -- columns and statuses ---------------------------------------------------------------------

JOB_COLUMNS = (
    "id", "caller", "caller_class", "idem_key", "status", "error", "targets_total",
    "targets_done", "created_at", "lease", "nbytes", "started_at",
)  # fmt: skip
TARGET_COLUMNS = (
    "job_id", "idx", "url", "options", "status", "result", "error", "hint", "retry_at",
    "busy_since", "retryable", "retry_after",
)  # fmt: skip


def columns(names: Sequence[str], prefix: str = "", *, results: bool = True) -> str:
    """A select list of `names` (each after `prefix`, a table alias); without `results`, a
    target's result reads as null (a status read that leaves results out)."""
    return ", ".join("null" if n == "result" and not results else f"{prefix}{n}" for n in names)


LIVE_STATUSES = tuple(str(s) for s in LIVE)
REUSABLE_STATUSES = tuple(str(s) for s in REUSABLE)
RUNNING, PENDING = str(TargetStatus.RUNNING), str(TargetStatus.PENDING)
QUEUED = str(JobStatus.QUEUED)

# Robots.txt bodies the store keeps at most, all origins together; the oldest go first.
ROBOTS_STORED_BYTES = 16 * 1024 * 1024


def nbytes(text: str | None) -> int:
    """What a stored text counts against the byte budget: its UTF-8 bytes, counted without a
    copy when it is ASCII (CPython knows that of every string without a scan)."""
    if not text:
        return 0
    return len(text) if text.isascii() else len(text.encode())


# -- the sliding lease (docs/API.md §Job lifetime) --------------------------------------------
# Every write to a job sets its lease to that write's `now`; an owner's status read slides it
# too, at most once per TOUCH_EVERY seconds; a job is gone once its lease + ttl is not after now.

TOUCH_EVERY = 1.0


def touch_due(job: Job, now: float) -> bool:
    """Whether an owner's read at `now` slides the lease (not within TOUCH_EVERY of the last)."""
    return now - job.lease >= TOUCH_EVERY


def expires_at(lease: float, ttl: float) -> float:
    """When a job whose lease is `lease` expires: the one expiry test, here and in SQL."""
    return lease + ttl


def expired_sql(mark: str) -> str:
    """`expires_at` as a condition on the `lease` column, true once a job is gone; its two
    parameters (`mark`, the dialect's placeholder) are the ttl, then now."""
    return f"lease + {mark} <= {mark}"


def unexpired_sql(mark: str) -> str:
    """The negation of `expired_sql`, with the same two parameters (ttl, now)."""
    return f"lease + {mark} > {mark}"


# -- a caller's job list (docs/API.md §GET /v1/batch) -------------------------------------------
# Live first, then newest first, then by id: keyset-paginated, so a page costs the same however
# deep it is and a job submitted meanwhile never shifts the next page.

LIST_ORDER = "order by ended, created_at desc, id desc"


def after_sql(mark: str, after: ListPosition | None) -> tuple[str, list]:
    """The condition (and its parameters) that starts a page after `after`, in `LIST_ORDER`."""
    if after is None:
        return "", []
    m = mark
    cond = (
        f"and (ended > {m} or (ended = {m} and (created_at < {m} "
        f"or (created_at = {m} and id < {m}))))"
    )
    return cond, [after.ended, after.ended, after.created_at, after.created_at, after.id]


# -- submit ------------------------------------------------------------------------------------


def submit_refusal(job: NewJob, caps: Caps, mine: int, total: int) -> str | None:
    """Which cap refuses `job`, in the order docs/API.md §POST /v1/batch gives (`mine`: the
    caller's live jobs of its class, `total`: all live jobs), or None."""
    if len(job.targets) > caps.targets_per_job:
        return "too_many"
    if mine >= caps.jobs_per_caller:
        return "caller_busy"
    if total >= caps.jobs_total:
        return "jobs_busy"
    return None


# -- storing a target ---------------------------------------------------------------------------


class Stored(NamedTuple):
    """What a target's row and its job's counts record once a fetch is stored."""

    result: str | None
    error: str | None
    hint: str | None
    retryable: bool | None
    retry_after: float | None
    done: int  # added to the job's targets_done
    nbytes: int  # added to the job's nbytes


def stored(f: Fetched) -> Stored:
    """What a target stored as `f.status` keeps: only a finished one its result and failure
    (a target put back to wait keeps none); `retry_after` only where a retry may succeed."""
    if f.status not in FINISHED:
        return Stored(None, None, None, None, None, 0, 0)
    kept_after = f.retry_after if f.retryable else None
    return Stored(f.result, f.error, f.hint, f.retryable, kept_after, 1, nbytes(f.result))


def terminal_status(failed: int, total: int) -> str:
    """A job's status once its last target is stored."""
    if failed == total:
        return str(JobStatus.FAILED)
    return str(JobStatus.DONE if failed == 0 else JobStatus.PARTIAL)


def stored_rows(f: Fetched) -> list[tuple[str, str, float]]:
    """The counter rows a stored target bumps."""
    rows = [(series.TARGETS_TOTAL, f.outcome, 1.0)]
    rows += series.observation(series.TARGET_SECONDS, f.seconds, SECONDS_BUCKETS)
    if f.result is not None:
        rows += series.observation(series.RESULT_BYTES, nbytes(f.result), BYTES_BUCKETS)
    return rows


def terminal_rows(terminal: str, job_seconds: float) -> list[tuple[str, str, float]]:
    """The counter rows a job reaching `terminal` bumps, `job_seconds` after its submit."""
    rows = [(series.JOBS_TOTAL, terminal, 1.0)]
    return rows + series.observation(series.JOB_SECONDS, job_seconds, SECONDS_BUCKETS)


# -- the byte budget (docs/WORKER.md §Byte budget) ----------------------------------------------


class Held(NamedTuple):
    """One job as the byte budget sees it."""

    id: str
    owner: tuple[str, str]  # (caller, class)
    nbytes: int
    ended: bool


def eviction_victims(jobs: Sequence[Held], max_bytes: int, for_job: str | None) -> list[str]:
    """Whole finished jobs to remove until batch bytes fit `max_bytes`; never a live job.

    `jobs` are all jobs, oldest lease first. The owner of `for_job` (the job whose result is
    being stored) pays first: its own finished jobs go, oldest first. Then only callers
    holding more than an equal share (`max_bytes` ÷ callers with stored bytes) lose their
    oldest finished jobs, down to the share; a caller within its share keeps its jobs, so one
    caller cannot evict everyone's results.
    """
    total = sum(j.nbytes for j in jobs)
    if total <= max_bytes:
        return []
    held: dict[tuple[str, str], int] = {}
    for job in jobs:
        held[job.owner] = held.get(job.owner, 0) + job.nbytes
    payer = next((j.owner for j in jobs if j.id == for_job), None)
    share = max_bytes / max(1, sum(1 for n in held.values() if n > 0))
    finished = [j for j in jobs if j.ended]
    victims: list[str] = []
    for first_pass in (True, False):  # the payer's own first, then whoever is over a share
        for job in finished:
            if total <= max_bytes:
                return victims
            if not first_pass and job.owner == payer and job.id != for_job:
                continue  # the first pass took it
            if first_pass and (job.owner != payer or job.id == for_job):
                continue
            if not first_pass and held[job.owner] <= share:
                continue
            victims.append(job.id)
            total -= job.nbytes
            held[job.owner] -= job.nbytes
    return victims
