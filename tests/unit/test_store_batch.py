"""The batch store's operations, each one transaction (docs/WORKER.md §The store's
transactions; the lease, idempotency and caps of docs/API.md §Job lifetime and
§POST /v1/batch).

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
from sift.store.series import JOBS_TOTAL, TARGETS_TOTAL, cumulative
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


async def test_touch_slides_at_most_once_a_second(batch, rows):
    job = await _create(batch, "j1", T0)
    assert not await batch.touch(job, T0 + 0.999)
    assert rows.job("j1").lease == T0
    assert await batch.touch(job, T0 + 1)


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


async def test_reuse_is_scoped_to_the_caller(batch):
    await _create(batch, "a1", T0, caller="alice", key="same")
    await _create(batch, "b1", T0, caller="bob", key="same")
    assert await _reused(batch, "same", T0 + 1) == "a1"
    assert await _reused(batch, "same", T0 + 2, caller="bob") == "b1"
    assert await _reused(batch, "same", T0 + 3, caller="carol") is None
    assert await _reused(batch, "other", T0 + 4) is None


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


async def test_targets_without_results_keep_status_error_and_hint(batch):
    await _create(batch, "j1", T0, n=2)
    await _run(batch, "j1", T0, ["ok", "timeout"])
    _, full = await batch.status("j1")
    _, light = await batch.status("j1", results=False)
    assert full[0].result is not None
    assert [t.result for t in light] == [None, None]
    assert [(t.idx, t.url, t.status, t.error, t.hint) for t in light] == [
        (t.idx, t.url, t.status, t.error, t.hint) for t in full
    ]


async def test_finishing_a_target_counts_into_targets_done_exactly_once(batch, rows):
    await _create(batch, "j1", T0, n=3)
    await _run(batch, "j1", T0, ["ok"])
    assert rows.job("j1").targets_done == 1
    # Storing the same target again is refused: it is no longer running.
    assert not (await _store(batch, "j1", 0, "timeout", T0 + 3)).stored
    assert rows.job("j1").targets_done == 1
    await batch.claim("j1", T0 + 4)
    assert rows.job("j1").targets_done == 1
    await _store(batch, "j1", 1, "timeout", T0 + 5)
    assert rows.job("j1").targets_done == 2


async def test_finishing_a_target_adds_the_utf8_byte_length_of_its_result_to_nbytes(batch, rows):
    await _create(batch, "j1", T0, n=3)
    first = json.dumps({"content": "café 🙂"}, ensure_ascii=False)
    second = json.dumps({"content": "ascii only"})
    assert len(first.encode()) > len(first)
    for idx, result in enumerate((first, second)):
        await batch.claim("j1", T0 + idx)
        await _store(batch, "j1", idx, "ok", T0 + idx, result=result)
    assert rows.job("j1").nbytes == len(first.encode()) + len(second.encode())
    await _run(batch, "j1", T0 + 3, ["timeout"])
    assert rows.job("j1").nbytes == len(first.encode()) + len(second.encode())
    assert rows.batch_nbytes() == len(first.encode()) + len(second.encode())


# -- 5. sweep --------------------------------------------------------------------------------


async def test_sweep_deletes_every_job_whose_lease_plus_ttl_is_not_after_now_with_its_targets(
    batch, rows
):
    await _create(batch, "old-live", T0)  # still queued: sweep goes by time alone
    await _create(batch, "old-done", T0 + 10)
    await _run(batch, "old-done", T0 + 10, ["ok", "ok"])  # lease T0 + 12
    await _create(batch, "boundary", T0 + 50)
    await _create(batch, "just-alive", T0 + 50.5)
    await _create(batch, "fresh", T0 + 90)
    assert await batch.sweep(T0 + 150, 100) == 3
    remaining = {j[0] for j in _all_rows(rows)[0]}
    assert remaining == {"just-alive", "fresh"}
    for gone in ("old-live", "old-done", "boundary"):
        assert _target_count(rows, gone) == 0
        assert rows.job(gone) is None
    assert _target_count(rows, "fresh") == 2
    assert await batch.sweep(T0 + 150, 100) == 0


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


async def test_the_byte_budget_removes_whole_jobs_oldest_lease_first(batch, rows):
    await _finished_job(batch, "y", 100, lease=T0 + 100)
    await _finished_job(batch, "z", 100, lease=T0 + 200)
    # Exactly at the budget is within it.
    assert (await _finished_job(batch, "x", 100, lease=T0 + 300, max_bytes=300)).evicted == 0
    assert (await _finished_job(batch, "w", 50, lease=T0 + 400, max_bytes=150)).evicted == 2
    assert {j[0] for j in _all_rows(rows)[0]} == {"x", "w"}
    assert _target_count(rows, "y") == _target_count(rows, "z") == 0
    assert rows.batch_nbytes() == 150


async def test_the_byte_budget_never_removes_a_live_job_even_over_budget(batch, rows):
    await _create(batch, "running", T0, n=2)
    await batch.claim("running", T0)
    await _store(batch, "running", 0, "ok", T0 + 1, result="r" * 500)
    await _finished_job(batch, "done", 10, lease=T0 + 2)
    await _create(batch, "last", T0 + 3, n=2)
    await batch.claim("last", T0 + 3)
    res = await batch.finish(
        "last",
        0,
        status="done",
        outcome="ok",
        seconds=1,
        now=T0 + 4,
        result="q" * 300,
        max_bytes=100,
    )
    assert res.evicted == 1
    assert {j[0] for j in _all_rows(rows)[0]} == {"running", "last"}
    assert rows.batch_nbytes() == 800  # still over budget: nothing else may go


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


# -- submit ----------------------------------------------------------------------------------


async def test_submit_creates_a_queued_job_with_pending_targets_and_counts_created(
    store, batch, rows
):
    out = await _submit(batch, "j1", T0, n=3)
    assert out.kind == "created"
    assert out.job == rows.job("j1")
    assert (out.job.status, out.job.created_at, out.job.lease, out.job.targets_total) == (
        "queued",
        T0,
        T0,
        3,
    )
    assert [t.status for t in rows.targets("j1")] == ["pending"] * 3
    assert _counter(rows, JOBS_TOTAL, "created") == 1


async def test_submit_with_a_known_idempotency_key_returns_the_existing_job_and_counts_reused(
    store, batch, rows
):
    first = await _submit(batch, "j1", T0, key="k", jobs_per_caller=1)
    # No caps for a reuse: the caller already has its one live job, and the list is over cap.
    again = await _submit(batch, "j2", T0 + 5, key="k", jobs_per_caller=1, targets_per_job=1)
    assert again.kind == "reused"
    assert again.job.id == "j1"
    assert again.job == first.job  # reuse does not slide the lease
    assert rows.job("j2") is None
    assert rows.gauges()[0] == 1
    assert _counter(rows, JOBS_TOTAL, "created") == 1
    assert _counter(rows, JOBS_TOTAL, "reused") == 1


async def test_submit_checks_caps_in_order_too_many_then_caller_busy_then_jobs_busy(
    store, batch, rows
):
    assert (await _submit(batch, "a1", T0, caller="alice")).kind == "created"
    assert (await _submit(batch, "b1", T0, caller="bob")).kind == "created"
    caps = {"targets_per_job": 2, "jobs_per_caller": 1, "jobs_total": 2}
    assert (await _submit(batch, "x", T0 + 1, n=3, caller="alice", **caps)).kind == "too_many"
    assert (await _submit(batch, "x", T0 + 1, n=2, caller="alice", **caps)).kind == "caller_busy"
    assert (await _submit(batch, "x", T0 + 1, n=2, caller="carol", **caps)).kind == "jobs_busy"
    assert rows.job("x") is None
    assert _counter(rows, JOBS_TOTAL, "created") == 2
    assert _counter(rows, JOBS_TOTAL, "reused") == 0


async def test_submit_caps_are_inclusive_and_count_only_live_jobs(batch, rows):
    caps = {"targets_per_job": 3, "jobs_per_caller": 2, "jobs_total": 3}
    assert (await _submit(batch, "a1", T0, n=3, caller="alice", **caps)).kind == "created"
    assert (await _submit(batch, "a2", T0, n=1, caller="alice", **caps)).kind == "created"
    assert (await _submit(batch, "a3", T0, n=1, caller="alice", **caps)).kind == "caller_busy"
    assert (await _submit(batch, "b1", T0, n=1, caller="bob", **caps)).kind == "created"
    assert (await _submit(batch, "c1", T0, n=1, caller="carol", **caps)).kind == "jobs_busy"
    await _run(batch, "a1", T0 + 1, ["ok", "ok", "ok"])  # done: no longer live
    await batch.cancel("b1", T0 + 1)
    assert (await _submit(batch, "a3", T0 + 2, n=1, caller="alice", **caps)).kind == "created"
    assert (await _submit(batch, "c1", T0 + 2, n=1, caller="carol", **caps)).kind == "created"


async def test_submit_sweeps_expired_jobs(batch, rows):
    await _submit(batch, "old", T0, ttl=100)
    await _run(batch, "old", T0, ["ok", "ok"])  # lease T0 + 2
    await _submit(batch, "kept", T0 + 50, ttl=100)
    assert (await _submit(batch, "new", T0 + 102, ttl=100)).kind == "created"
    assert rows.job("old") is None
    assert rows.job("kept") is not None
    assert rows.job("new") is not None


# -- claim -----------------------------------------------------------------------------------


async def test_first_claim_sets_the_job_running_and_takes_target_zero(batch, rows):
    await _create(batch, "j1", T0, caller="bob", caller_class="restricted")
    claim = await batch.claim("j1", T0 + 3)
    assert (claim.job_id, claim.idx, claim.url, claim.caller, claim.caller_class) == (
        "j1",
        0,
        "http://127.0.0.1:9/0",
        "bob",
        "restricted",
    )
    assert json.loads(claim.options) == {"mode": "clean", "n": 0}
    assert claim.busy_since is None
    job = rows.job("j1")
    assert (job.status, job.started_at, job.lease, job.created_at) == (
        "running",
        T0 + 3,
        T0 + 3,
        T0,
    )
    assert [t.status for t in rows.targets("j1")] == ["running", "pending"]


async def test_claim_is_serial_no_target_while_one_is_running(batch, rows):
    await _create(batch, "j1", T0, n=3)
    assert (await batch.claim("j1", T0 + 1)).idx == 0
    assert await batch.claim("j1", T0 + 2) is None
    await batch.finish("j1", 0, status="done", outcome="ok", seconds=1, now=T0 + 3, result="{}")
    second = await batch.claim("j1", T0 + 4)
    assert second.idx == 1
    job = rows.job("j1")
    assert (job.status, job.started_at, job.lease) == ("running", T0 + 1, T0 + 4)


async def test_claim_respects_the_retry_time_of_a_requeued_target(batch, rows):
    await _create(batch, "j1", T0, n=1)
    await batch.claim("j1", T0)
    assert await batch.requeue("j1", 0, retry_at=T0 + 2, busy_since=T0, now=T0 + 0.5)
    assert await batch.claim("j1", T0 + 1.999) is None
    again = await batch.claim("j1", T0 + 2)
    assert (again.idx, again.busy_since) == (0, T0)


async def test_claim_never_skips_a_target_waiting_to_retry(batch, rows):
    await _create(batch, "j1", T0, n=3)
    await batch.claim("j1", T0)
    await batch.requeue("j1", 0, retry_at=T0 + 2, busy_since=T0, now=T0 + 0.5)
    assert await batch.claim("j1", T0 + 1) is None
    assert (await batch.claim("j1", T0 + 2)).idx == 0


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


async def test_claim_takes_nothing_from_cancelled_or_finished_jobs(batch, rows):
    await _create(batch, "cancelled", T0)
    await batch.cancel("cancelled", T0 + 1)
    await _create(batch, "failed", T0)
    await batch.claim("failed", T0)
    await batch.restart(T0 + 1)
    await _create(batch, "done", T0 + 2, n=1)
    await _run(batch, "done", T0 + 2, ["ok"])
    for job_id in ("cancelled", "failed", "done"):
        before = rows.job(job_id)
        assert await batch.claim(job_id, T0 + 10) is None
        assert rows.job(job_id) == before
    assert [t.status for t in rows.targets("cancelled")] == ["pending", "pending"]


# -- requeue ---------------------------------------------------------------------------------


async def test_requeue_returns_a_running_target_to_pending_with_its_retry_time(batch, rows):
    await _create(batch, "j1", T0)
    await batch.claim("j1", T0 + 1)
    assert await batch.requeue("j1", 0, retry_at=T0 + 5, busy_since=T0 + 1, now=T0 + 3)
    target = rows.targets("j1")[0]
    assert (target.status, target.retry_at, target.busy_since) == ("pending", T0 + 5, T0 + 1)
    job = rows.job("j1")
    assert (job.status, job.lease, job.targets_done) == ("running", T0 + 3, 0)
    # Only a running target goes back: a second requeue changes nothing.
    assert not await batch.requeue("j1", 0, retry_at=T0 + 9, busy_since=T0, now=T0 + 4)
    assert rows.targets("j1")[0].retry_at == T0 + 5
    assert rows.job("j1").lease == T0 + 3


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


async def test_finish_sets_done_when_every_target_is_done_with_its_metrics(batch, rows):
    await _create(batch, "j1", T0, n=2)
    results = [(await _run(batch, "j1", T0 + 10, ["ok"], step=0.25))[0]]
    results += await _run(batch, "j1", T0 + 20, ["ok"], step=0.25)
    assert results == [Finished(True, None), Finished(True, "done")]
    job = rows.job("j1")
    assert (job.status, job.targets_done, job.lease) == ("done", 2, T0 + 20.25)
    assert _counter(rows, JOBS_TOTAL, "done") == 1
    assert _counter(rows, TARGETS_TOTAL, "ok") == 2
    job_hist = _bucket_counts(rows, "sift_batch_job_seconds")
    assert job_hist["count"] == 1
    assert job_hist["sum"] == 20.25
    for le in SECONDS_BUCKETS:
        assert job_hist.get(f"le={le}", 0) == (1 if le >= 20.25 else 0)
    assert job_hist["le=+Inf"] == 1
    target_hist = _bucket_counts(rows, "sift_batch_target_seconds")
    assert (target_hist["count"], target_hist["sum"]) == (2, 0.5)
    assert (target_hist["le=0.25"], target_hist.get("le=0.1", 0)) == (2, 0)
    nbytes = len(rows.targets("j1")[0].result.encode())
    bytes_hist = _bucket_counts(rows, "sift_batch_result_bytes")
    assert (bytes_hist["count"], bytes_hist["sum"]) == (2, 2 * nbytes)
    assert bytes_hist[f"le={BYTES_BUCKETS[0]}"] == 2


async def test_finish_sets_failed_when_every_target_failed(batch, rows):
    await _create(batch, "j1", T0, n=2)
    assert (await _run(batch, "j1", T0, ["timeout", "blocked"]))[-1] == Finished(True, "failed")
    job = rows.job("j1")
    assert (job.status, job.error, job.nbytes) == ("failed", "", 0)
    targets = rows.targets("j1")
    assert [(t.status, t.error, t.hint) for t in targets] == [
        ("failed", "timeout error", "retry"),
        ("failed", "blocked error", "retry"),
    ]
    assert _counter(rows, JOBS_TOTAL, "failed") == 1
    assert _counter(rows, TARGETS_TOTAL, "timeout") == 1
    assert _counter(rows, TARGETS_TOTAL, "blocked") == 1
    assert _bucket_counts(rows, "sift_batch_result_bytes").get("count", 0) == 0


async def test_finish_sets_partial_for_a_mix_of_done_and_failed(batch, rows):
    await _create(batch, "j1", T0, n=3)
    assert (await _run(batch, "j1", T0, ["ok", "upstream_5xx", "ok"]))[-1] == Finished(
        True, "partial"
    )
    assert rows.job("j1").status == "partial"
    assert _counter(rows, JOBS_TOTAL, "partial") == 1
    assert _counter(rows, TARGETS_TOTAL, "ok") == 2
    assert _counter(rows, TARGETS_TOTAL, "upstream_5xx") == 1


async def test_finish_sets_the_terminal_status_exactly_once(batch, rows):
    await _create(batch, "j1", T0, n=1)
    assert await _run(batch, "j1", T0, ["ok"]) == [Finished(True, "done")]
    # The target is no longer running: storing it again is refused and counts nothing.
    again = await batch.finish("j1", 0, status="failed", outcome="timeout", seconds=1, now=T0 + 9)
    assert again == Finished(False)
    assert rows.job("j1").status == "done"
    assert rows.targets("j1")[0].status == "done"
    counters = rows.counters()
    assert counters[(JOBS_TOTAL, "done")] == 1
    assert (JOBS_TOTAL, "failed") not in counters
    assert (TARGETS_TOTAL, "timeout") not in counters
    assert _bucket_counts(rows, "sift_batch_job_seconds")["count"] == 1


async def test_finish_stores_only_a_running_target(batch, rows):
    await _create(batch, "j1", T0, n=2)
    before, counted = _all_rows(rows), rows.counters()
    assert await batch.finish(
        "j1", 1, status="done", outcome="ok", seconds=1, now=T0 + 1
    ) == Finished(False)
    assert _all_rows(rows) == before
    assert rows.counters() == counted


async def test_finish_never_overwrites_cancelled(batch, rows):
    await _create(batch, "j1", T0, n=2)
    await batch.claim("j1", T0 + 1)
    await batch.cancel("j1", T0 + 2)
    res = await batch.finish(
        "j1", 0, status="done", outcome="ok", seconds=1, now=T0 + 3, result="{}"
    )
    assert res == Finished(True, None)
    assert await batch.claim("j1", T0 + 4) is None  # no further target starts
    job = rows.job("j1")
    assert (job.status, job.targets_done, job.lease) == ("cancelled", 1, T0 + 3)
    assert [t.status for t in rows.targets("j1")] == ["done", "pending"]
    # Even when the in-flight target was the last one, cancelled stays.
    await _create(batch, "j2", T0, n=1)
    await batch.claim("j2", T0 + 1)
    await batch.cancel("j2", T0 + 2)
    assert await batch.finish(
        "j2", 0, status="failed", outcome="timeout", seconds=1, now=T0 + 3
    ) == (Finished(True, None))
    assert rows.job("j2").status == "cancelled"
    counters = rows.counters()
    assert counters[(JOBS_TOTAL, "cancelled")] == 2
    assert not {"done", "failed", "partial"} & {lbl for n, lbl in counters if n == JOBS_TOTAL}


async def test_finish_folds_an_unknown_outcome_to_other(batch, rows):
    await _create(batch, "j1", T0, n=1)
    await _run(batch, "j1", T0, ["made up outcome"])
    assert _counter(rows, TARGETS_TOTAL, "other") == 1
    assert (TARGETS_TOTAL, "made up outcome") not in rows.counters()


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


async def test_finish_then_claim_takes_the_first_ready_job_in_the_same_transaction(batch, rows):
    await _create(batch, "a", T0)
    await _create(batch, "busy", T0)
    await _create(batch, "b", T0)
    claim = await batch.claim("a", T0 + 1)
    await batch.claim("busy", T0 + 1)  # has a target in flight: not ready
    res = await _done_then_claim(batch, claim, ["busy", "b", "a"])
    assert res.stored and res.next is not None
    assert (res.next.job_id, res.next.idx) == ("b", 0)
    job = rows.job("b")
    assert (job.status, job.lease) == ("running", T0 + 2)
    assert [t.status for t in rows.targets("b")] == ["running", "pending"]
    assert [t.status for t in rows.targets("a")] == ["done", "pending"]


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


# -- cancel ----------------------------------------------------------------------------------


async def test_cancel_flips_a_live_job_and_returns_it_as_it_was(batch, rows):
    await _create(batch, "queued", T0)
    await _create(batch, "running", T0)
    await batch.claim("running", T0 + 1)
    prior = await batch.cancel("queued", T0 + 5)
    assert (prior.status, prior.lease) == ("queued", T0)
    prior = await batch.cancel("running", T0 + 6)
    assert (prior.status, prior.lease) == ("running", T0 + 1)
    for job_id, now in (("queued", T0 + 5), ("running", T0 + 6)):
        job = rows.job(job_id)
        assert (job.status, job.lease) == ("cancelled", now)
    assert _counter(rows, JOBS_TOTAL, "cancelled") == 2
    assert rows.gauges()[0] == 0


async def test_cancel_is_counted_once_and_leaves_finished_jobs_alone(batch, rows):
    await _create(batch, "j1", T0)
    await batch.cancel("j1", T0 + 1)
    again = await batch.cancel("j1", T0 + 2)
    assert (again.status, again.lease) == ("cancelled", T0 + 1)
    assert rows.job("j1").lease == T0 + 1
    await _create(batch, "done", T0, n=1)
    await _run(batch, "done", T0, ["ok"])
    before = rows.job("done")
    assert await batch.cancel("done", T0 + 9) == before
    assert rows.job("done") == before
    assert _counter(rows, JOBS_TOTAL, "cancelled") == 1


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


async def test_gauges_count_live_jobs_and_running_targets(batch, rows):
    assert rows.gauges() == (0, 0)
    await _create(batch, "q1", T0)
    await _create(batch, "q2", T0)
    await _create(batch, "r1", T0)
    await batch.claim("r1", T0 + 1)
    await _create(batch, "done", T0, n=1)
    await _run(batch, "done", T0, ["ok"])
    assert rows.gauges() == (3, 1)
    await batch.cancel("r1", T0 + 2)  # its target is still in flight until stored
    assert rows.gauges() == (2, 1)
    await batch.finish("r1", 0, status="done", outcome="ok", seconds=1, now=T0 + 3, result="{}")
    assert rows.gauges() == (2, 0)


async def test_live_jobs_are_in_submit_order_and_only_live(batch, rows):
    await _create(batch, "late", T0 + 20)
    await _create(batch, "early", T0)
    await _create(batch, "mid-b", T0 + 10)
    await _create(batch, "mid-a", T0 + 10)  # same second: insert order
    await _create(batch, "gone", T0 + 5)
    await batch.cancel("gone", T0 + 30)
    await batch.claim("mid-a", T0 + 31)
    assert await batch.live_jobs() == ["early", "mid-b", "mid-a", "late"]
