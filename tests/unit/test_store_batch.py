"""The batch store's operations, each one transaction (docs/WORKER.md §The store's
transactions; the lease, idempotency and caps of docs/API.md §Job lifetime and
§POST /v1/batch).

Only what the contract suite (tests/contract/test_batch_store.py, both engines) does not
state lives here: the exact rows SQLite writes, its restart rule, and the helpers' details.
Every test runs on a real database file and goes through the operations production calls;
rows are read back with a connection of the test's own. Time is always passed as `now`, so
lease values are asserted exactly.
"""

from __future__ import annotations

import inspect
import json

import apsw
import pytest

from sift.constants import BYTES_BUCKETS, SECONDS_BUCKETS
from sift.store import CachedResponse, Finished, Store
from sift.store.batch import BatchStore
from sift.store.db import Database
from sift.store.series import JOBS_TOTAL, cumulative
from tests.dbview import DbView
from tests.storekit import TTL
from tests.storekit import submit as _submit

T0 = 1_700_000_000.0


@pytest.fixture
def store(tmp_path):
    s = Store(Database(tmp_path / "sift.db"))
    yield s
    s.close()


@pytest.fixture
def batch(store) -> BatchStore:
    return store.batch


@pytest.fixture
def rows(store) -> DbView:
    return DbView(store.path)


async def _create(batch, job_id, now, n=2, **kw):
    """A new job (a submit that must create one)."""
    out = await _submit(batch, job_id, now, n, **kw)
    assert out.kind == "created", out.kind
    return out.job


async def _store(batch, job_id, idx, outcome, now, step=1.0, result=None):
    """Store a claimed target: `ok` done (with `result` or a small envelope), else failed."""
    if outcome == "ok":
        return await batch.finish(
            job_id,
            idx,
            status="done",
            outcome="ok",
            seconds=step,
            now=now,
            result=result or json.dumps({"success": True, "content": f"#{idx}"}),
        )
    return await batch.finish(
        job_id,
        idx,
        status="failed",
        outcome=outcome,
        seconds=step,
        now=now,
        error=f"{outcome} error",
        hint="retry",
    )


async def _run(batch, job_id, now, outcomes, step=1.0) -> list[Finished]:
    """Claim and finish one target per outcome (`ok` stores done, anything else failed)."""
    out = []
    for outcome in outcomes:
        claim = await batch.claim(job_id, now)
        assert claim is not None
        now += step
        out.append(await _store(batch, job_id, claim.idx, outcome, now, step))
    return out


def _all_rows(rows) -> tuple[list, list]:
    return (
        rows.all("select * from batch_job order by id"),
        rows.all("select * from batch_target order by job_id, idx"),
    )


def _target_count(rows, job_id) -> int:
    return rows.one("select count(*) from batch_target where job_id = ?", (job_id,))


def _counter(rows, name, label) -> float:
    return rows.counters().get((name, label), 0)


# -- 1. sliding lease ------------------------------------------------------------------------


async def test_submit_stores_created_at_and_lease_as_the_given_now(batch, rows):
    job = await _create(batch, "j1", T0 + 0.25, n=3, caller="alice", caller_class="restricted")
    stored = rows.job("j1")
    assert stored == job
    assert (stored.created_at, stored.lease) == (T0 + 0.25, T0 + 0.25)
    assert (stored.caller, stored.caller_class, stored.idem_key) == (
        "alice",
        "restricted",
        "key-j1",
    )
    assert (stored.status, stored.error, stored.targets_total, stored.targets_done) == (
        "queued",
        "",
        3,
        0,
    )
    assert stored.nbytes == 0
    targets = rows.targets("j1")
    assert [(t.idx, t.status, t.result, t.error, t.hint) for t in targets] == [
        (i, "pending", None, None, None) for i in range(3)
    ]
    assert [json.loads(t.options)["n"] for t in targets] == [0, 1, 2]


async def test_every_job_write_sets_the_lease_to_its_now(batch, rows):
    await _create(batch, "j1", T0, n=3)
    await batch.claim("j1", T0 + 10)
    assert rows.job("j1").lease == T0 + 10
    await _store(batch, "j1", 0, "ok", T0 + 20)
    assert rows.job("j1").lease == T0 + 20
    await batch.claim("j1", T0 + 21)
    await batch.requeue("j1", 1, retry_at=T0 + 30, busy_since=T0 + 21, now=T0 + 22)
    assert rows.job("j1").lease == T0 + 22
    await batch.cancel("j1", T0 + 40)
    job = rows.job("j1")
    assert (job.created_at, job.lease) == (T0, T0 + 40)


async def test_touch_sets_the_job_lease_to_its_now_and_nothing_else(batch, rows):
    before = await _create(batch, "j1", T0)
    assert await batch.touch(before, T0 + 3600)
    assert rows.job("j1") == before._replace(lease=T0 + 3600)


async def test_restart_sets_the_lease_of_the_jobs_it_fails_to_its_now(batch, rows):
    await _create(batch, "queued", T0)
    await _create(batch, "running", T0 + 1)
    await batch.claim("running", T0 + 2)
    assert await batch.restart(T0 + 500) == 1
    assert rows.job("queued").lease == T0  # untouched: it waits for the new worker
    assert rows.job("running").lease == T0 + 500


async def test_reads_never_write(store, batch, rows, tmp_path):
    await _create(batch, "j1", T0, n=3)
    await _create(batch, "j2", T0 + 1, caller="bob")
    await _run(batch, "j1", T0 + 2, ["ok"])
    await batch.claim("j1", T0 + 5)
    observer = apsw.Connection(str(tmp_path / "sift.db"))
    version = observer.cursor().execute("pragma data_version").fetchone()[0]
    before = _all_rows(rows)

    assert await batch.job("j1") is not None
    assert await batch.status("j1") is not None
    assert await batch.status("j2", results=False) is not None
    assert await batch.live_jobs() == ["j1", "j2"]
    assert rows.gauges() == (2, 1)
    assert await batch.terminal_among(["j1", "j2", "gone"]) == ["gone"]
    assert (await store.batch_series()).queue_depth == 2
    await store.data_version()

    assert _all_rows(rows) == before
    assert observer.cursor().execute("pragma data_version").fetchone()[0] == version
    observer.close()


# -- 2. keyed by job id only -----------------------------------------------------------------


async def test_operations_are_keyed_by_job_id_only(batch, rows):
    await _create(batch, "a1", T0, caller="alice")
    await _create(batch, "b1", T0, caller="bob")
    # Whoever asks, the id alone finds, changes and cancels the job: ownership is the API's job.
    assert (await batch.job("b1")).caller == "bob"
    assert (await batch.claim("b1", T0 + 1)).caller == "bob"
    assert (await batch.cancel("b1", T0 + 2)).caller == "bob"
    assert rows.job("a1").status == "queued"
    for name in ("job", "status", "claim", "requeue", "finish", "cancel"):
        params = inspect.signature(getattr(batch, name)).parameters
        assert "caller" not in params and "caller_class" not in params, name
        assert next(iter(params)) == "job_id", name


# -- 3. idempotent reuse ---------------------------------------------------------------------


async def _reused(batch, key, now, ttl=TTL, caller="alice") -> str | None:
    out = await _submit(batch, f"probe-{now}", now, key=key, ttl=ttl, caller=caller)
    if out.kind == "reused":
        return out.job.id
    await batch.cancel(out.job.id, now)  # a probe that created a job: take it out of the way
    return None


async def test_reuse_needs_lease_plus_ttl_after_now(batch):
    await _create(batch, "j1", T0, ttl=100)
    assert await _reused(batch, "key-j1", T0 + 99.5, ttl=100) == "j1"
    assert await _reused(batch, "key-j1", T0 + 100, ttl=100) is None


async def test_reuse_follows_the_sliding_lease(batch):
    job = await _create(batch, "j1", T0, ttl=100)
    await batch.touch(job, T0 + 50)
    assert await _reused(batch, "key-j1", T0 + 149.5, ttl=100) == "j1"
    assert await _reused(batch, "key-j1", T0 + 150, ttl=100) is None


@pytest.mark.parametrize(
    ("outcomes", "status", "found"),
    [
        ([], "queued", True),
        (None, "running", True),
        (["ok", "ok"], "done", True),
        (["ok", "timeout"], "partial", True),
        (["timeout", "blocked"], "failed", False),
        ("restart", "failed", False),
        ("cancel", "cancelled", False),
    ],
    ids=["queued", "running", "done", "partial", "failed", "restart-failed", "cancelled"],
)
async def test_reuse_takes_only_queued_running_done_or_partial_jobs(
    batch, rows, outcomes, status, found
):
    await _create(batch, "j1", T0)
    if outcomes is None:
        await batch.claim("j1", T0 + 1)
    elif outcomes == "restart":
        await batch.claim("j1", T0 + 1)
        await batch.restart(T0 + 1)
    elif outcomes == "cancel":
        await batch.cancel("j1", T0 + 1)
    else:
        await _run(batch, "j1", T0 + 1, outcomes)
    assert rows.job("j1").status == status
    assert await _reused(batch, "key-j1", T0 + 10) == ("j1" if found else None)


async def test_reuse_takes_the_newest_matching_job(batch):
    await _create(batch, "old", T0, key="k")
    await batch.cancel("old", T0)
    await batch.restart(T0)  # nothing live: "old" stays cancelled
    # Both live at once need two live-job slots; the caps here allow it.
    await _create(batch, "new", T0 + 10, key="k2")
    await _create(batch, "newer", T0 + 10, key="k2-b")
    assert await _reused(batch, "k2", T0 + 20) == "new"
    assert await _reused(batch, "k2-b", T0 + 20) == "newer"


# -- 4. targets ------------------------------------------------------------------------------


async def test_targets_come_back_in_numeric_idx_order(batch):
    await _create(batch, "j1", T0, n=12)
    expected = list(range(12))  # lexical order would put 10 and 11 after 1
    _, targets = await batch.status("j1")
    assert [t.idx for t in targets] == expected
    assert [t.url for t in targets] == [f"http://127.0.0.1:9/{i}" for i in expected]
    _, targets = await batch.status("j1", results=False)
    assert [t.idx for t in targets] == expected


# -- 6. byte budget (kept by `finish` with `max_bytes`) --------------------------------------


async def _finished_job(batch, job_id, nbytes, lease, max_bytes=None):
    """A done job of one target with a result of `nbytes`, last written at `lease`."""
    await _create(batch, job_id, lease - 1, n=1)
    await batch.claim(job_id, lease - 1)
    return await batch.finish(
        job_id,
        0,
        status="done",
        outcome="ok",
        seconds=1,
        now=lease,
        result="r" * nbytes,
        max_bytes=max_bytes,
    )


async def test_batch_bytes_are_separate_from_the_content_cache(tmp_path):
    store = Store(Database(tmp_path / "sift.db"))
    store.cache.max_bytes = 1000
    rows = DbView(store.path)
    try:
        await _finished_job(store.batch, "j1", 100, lease=T0 + 1)
        body = b"b" * 900
        await store.cache.put("fleet", CachedResponse("u", "u", 200, "text/html", body, T0), T0)
        assert rows.batch_nbytes() == 100
        assert rows.cache_bytes() == 900
        # The content cache's eviction does not touch batch jobs, and the other way round.
        await store.cache.put("fleet", CachedResponse("v", "v", 200, "text/html", body, T0), T0 + 1)
        assert rows.job("j1") is not None
        assert (await _finished_job(store.batch, "j2", 10, T0 + 2, max_bytes=150)).evicted == 0
        assert rows.cache_bytes() == 900
        assert (await _finished_job(store.batch, "j3", 10, T0 + 3, max_bytes=50)).evicted == 1
        assert rows.cache_bytes() == 900
    finally:
        store.close()


# -- 7. restart ------------------------------------------------------------------------------


async def test_restart_fails_every_running_job_and_leaves_queued_and_terminal_ones(batch, rows):
    await _create(batch, "queued", T0)
    await _create(batch, "running", T0)
    await batch.claim("running", T0 + 1)
    terminal = {}
    runs = {"done": ["ok", "ok"], "partial": ["ok", "x"], "failed": ["x", "x"]}
    for job_id, outcomes in runs.items():
        await _create(batch, job_id, T0)
        await _run(batch, job_id, T0 + 1, outcomes)
        terminal[job_id] = rows.job(job_id)
    await _create(batch, "cancelled", T0)
    await batch.cancel("cancelled", T0 + 3)
    terminal["cancelled"] = rows.job("cancelled")

    queued = rows.job("queued")

    assert await batch.restart(T0 + 1000) == 1
    job = rows.job("running")
    assert (job.status, job.error, job.lease) == ("failed", "restart", T0 + 1000)
    assert rows.job("queued") == queued  # no target taken: the new worker starts it
    for job_id, before in terminal.items():
        assert rows.job(job_id) == before
    assert await batch.restart(T0 + 2000) == 0
    assert rows.job("running").lease == T0 + 1000


async def test_restart_puts_running_targets_back_to_pending_and_keeps_finished_ones(batch, rows):
    await _create(batch, "j1", T0, n=3)
    await _run(batch, "j1", T0, ["ok"])
    await batch.claim("j1", T0 + 5)
    await batch.restart(T0 + 10)
    targets = rows.targets("j1")
    assert [t.status for t in targets] == ["done", "pending", "pending"]
    assert targets[0].result is not None
    assert rows.job("j1").targets_done == 1
    assert rows.gauges() == (0, 0)


async def test_restart_returns_a_cancelled_jobs_stale_in_flight_target_to_pending(batch, rows):
    await _create(batch, "j1", T0, n=2)
    await batch.claim("j1", T0 + 1)
    await batch.cancel("j1", T0 + 2)  # the worker dies before storing the in-flight target
    await batch.restart(T0 + 10)
    assert [t.status for t in rows.targets("j1")] == ["pending", "pending"]
    assert rows.job("j1").status == "cancelled"
    assert rows.gauges() == (0, 0)


# -- 8. misses -------------------------------------------------------------------------------


async def test_operations_never_raise_on_a_miss(batch, rows):
    job = await _create(batch, "j1", T0, n=1)
    assert await batch.job("nope") is None
    assert await batch.status("nope") is None
    assert await batch.touch(job._replace(id="nope"), T0 + 5) is False
    assert await batch.claim("nope", T0) is None
    assert await batch.requeue("nope", 0, retry_at=T0, busy_since=T0, now=T0) is False
    assert await batch.requeue("j1", 7, retry_at=T0, busy_since=T0, now=T0) is False
    assert await batch.finish(
        "nope", 0, status="done", outcome="ok", seconds=0, now=T0
    ) == Finished(False)
    assert await batch.cancel("nope", T0) is None
    assert await batch.terminal_among(["nope"]) == ["nope"]
    assert rows.job("j1").lease == T0  # a miss on a neighbour changes nothing


# -- claim -----------------------------------------------------------------------------------


async def test_schema_keeps_large_values_in_the_last_column(store, rows):
    def last_column(table):
        return [r[1] for r in rows.all(f"pragma table_info({table})")][-1]

    assert (
        last_column("batch_target"),
        last_column("content_cache"),
        last_column("digest_cache"),
    ) == (
        "result",
        "body",
        "value",
    )


# -- finish ----------------------------------------------------------------------------------


def _bucket_counts(view, name) -> dict[str, float]:
    """sum, count and the cumulative `le=` counts Prometheus shows for a histogram."""
    rows = view.counters()
    bounds = BYTES_BUCKETS if name.endswith("_bytes") else SECONDS_BUCKETS
    counts = {f"le={b}": v for b, v in cumulative(rows, name, bounds)}
    return {
        **counts,
        **{lbl: v for (n, lbl), v in rows.items() if n == name and not lbl.startswith("bucket=")},
    }


async def _done_then_claim(batch, claim, then_claim):
    """Store `claim` done at T0 + 2, claiming from `then_claim` in the same transaction."""
    return await batch.finish(
        claim.job_id,
        claim.idx,
        status="done",
        outcome="ok",
        seconds=1,
        now=T0 + 2,
        result="{}",
        then_claim=then_claim,
    )


async def test_finish_then_claim_may_take_the_same_jobs_next_target(batch, rows):
    await _create(batch, "a", T0)
    claim = await batch.claim("a", T0 + 1)
    res = await _done_then_claim(batch, claim, ["a"])
    assert (res.next.job_id, res.next.idx) == ("a", 1)
    assert [t.status for t in rows.targets("a")] == ["done", "running"]


async def test_finish_then_claim_takes_nothing_when_no_job_is_ready(batch, rows):
    await _create(batch, "a", T0, n=1)
    claim = await batch.claim("a", T0 + 1)
    res = await _done_then_claim(batch, claim, ["a", "unknown"])
    assert res == Finished(True, "done")  # the job ended; nothing was claimed


# -- restart, gauges, rotation ---------------------------------------------------------------


async def test_restart_fails_started_jobs_with_restart_and_counts_each(batch, rows):
    for job_id in ("a", "b", "c", "waiting"):
        await _create(batch, job_id, T0)
    for job_id in ("a", "b", "c"):
        await batch.claim(job_id, T0 + 1)
    await _create(batch, "done", T0, n=1)
    await _run(batch, "done", T0, ["ok"])
    assert await batch.restart(T0 + 10) == 3
    assert {rows.job(j).error for j in ("a", "b", "c")} == {"restart"}
    assert {rows.job(j).status for j in ("a", "b", "c")} == {"failed"}
    assert rows.job("done").status == "done" and rows.job("waiting").status == "queued"
    assert _counter(rows, JOBS_TOTAL, "restart") == 3
    assert await batch.restart(T0 + 20) == 0
    assert _counter(rows, JOBS_TOTAL, "restart") == 3
    # A restart-failed job is not a finished-by-targets failure.
    assert _counter(rows, JOBS_TOTAL, "failed") == 0
