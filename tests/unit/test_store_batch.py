"""The batch tables (SPEC §4.2) and the runner's composite store operations (SPEC §4.3).

Every test runs on a real database file; time is always passed as `now`, so lease values are
asserted exactly.
"""

from __future__ import annotations

import inspect
import json

import apsw
import pytest

from sift.constants import BYTES_BUCKETS, SECONDS_BUCKETS
from sift.store import CachedResponse, Database, NewTarget, Store
from sift.store.batch import BatchStore, Finished
from sift.store.counters import JOBS_TOTAL, TARGETS_TOTAL, cumulative

T0 = 1_700_000_000.0
TTL = 86_400.0
ROOMY = {"targets_per_job": 32, "jobs_per_caller": 100, "jobs_total": 100}


@pytest.fixture
def store(tmp_path):
    s = Store(Database(tmp_path / "sift.db"))
    yield s
    s.close()


@pytest.fixture
def batch(store) -> BatchStore:
    return store.batch


def _targets(n: int) -> list[NewTarget]:
    return [
        NewTarget(f"http://127.0.0.1:9/{i}", json.dumps({"mode": "clean", "n": i}))
        for i in range(n)
    ]


def _create(batch, job_id, now, n=2, *, caller="alice", caller_class="fleet", key=None):
    return batch.create_job(job_id, caller, caller_class, key or f"key-{job_id}", _targets(n), now)


def _submit(batch, job_id, now, n=2, *, caller="alice", key=None, ttl=TTL, **caps):
    return batch.submit(
        job_id=job_id,
        caller=caller,
        caller_class="fleet",
        idem_key=key or f"key-{job_id}",
        targets=_targets(n),
        now=now,
        ttl=ttl,
        **{**ROOMY, **caps},
    )


def _run(batch, job_id, now, outcomes, step=1.0) -> list[Finished]:
    """Claim and finish one target per outcome (`ok` stores done, anything else failed)."""
    out = []
    for outcome in outcomes:
        claim = batch.claim(job_id, now)
        assert claim is not None
        now += step
        if outcome == "ok":
            res = batch.finish(
                job_id,
                claim.idx,
                status="done",
                outcome="ok",
                seconds=step,
                now=now,
                result=json.dumps({"success": True, "content": f"#{claim.idx}"}),
            )
        else:
            res = batch.finish(
                job_id,
                claim.idx,
                status="failed",
                outcome=outcome,
                seconds=step,
                now=now,
                error=f"{outcome} error",
                hint="retry",
            )
        out.append(res)
    return out


def _rows(store) -> tuple[list, list]:
    def read(c):
        jobs = c.execute("select * from batch_job order by id").fetchall()
        targets = c.execute("select * from batch_target order by job_id, idx").fetchall()
        return jobs, targets

    return store.db.read(read)


def _target_count(store, job_id) -> int:
    return store.db.read(
        lambda c: c.execute(
            "select count(*) from batch_target where job_id = ?", (job_id,)
        ).fetchone()[0]
    )


def _counter(store, name, label) -> float:
    return store.read_counters().get((name, label), 0)


# -- 1. sliding lease ------------------------------------------------------------------------


def test_create_job_stores_created_at_and_lease_as_the_given_now(batch):
    job = _create(batch, "j1", T0 + 0.25, n=3, caller="alice", caller_class="restricted")
    stored = batch.get_job("j1")
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
    targets = batch.get_targets("j1")
    assert [(t.idx, t.status, t.result, t.error, t.hint) for t in targets] == [
        (i, "pending", None, None, None) for i in range(3)
    ]
    assert [json.loads(t.options)["n"] for t in targets] == [0, 1, 2]


def test_update_target_sets_the_job_lease_to_its_now(batch):
    _create(batch, "j1", T0)
    assert batch.update_target("j1", 0, "running", T0 + 10)
    assert batch.get_job("j1").lease == T0 + 10
    assert batch.update_target("j1", 0, "done", T0 + 20, result='{"a": 1}')
    job = batch.get_job("j1")
    assert (job.created_at, job.lease) == (T0, T0 + 20)


def test_set_status_sets_the_job_lease_to_its_now(batch):
    _create(batch, "j1", T0)
    assert batch.set_status("j1", "running", T0 + 7)
    job = batch.get_job("j1")
    assert (job.status, job.lease, job.created_at, job.error) == ("running", T0 + 7, T0, "")
    assert batch.set_status("j1", "failed", T0 + 9, error="why")
    job = batch.get_job("j1")
    assert (job.status, job.lease, job.error) == ("failed", T0 + 9, "why")


def test_touch_sets_the_job_lease_to_its_now_and_nothing_else(batch):
    _create(batch, "j1", T0)
    before = batch.get_job("j1")
    assert batch.touch("j1", T0 + 3600)
    after = batch.get_job("j1")
    assert after == before._replace(lease=T0 + 3600)


def test_restart_hook_sets_the_lease_of_in_flight_jobs_to_its_now(batch):
    _create(batch, "queued", T0)
    _create(batch, "running", T0 + 1)
    batch.claim("running", T0 + 2)
    assert batch.mark_in_flight_failed("restart", T0 + 500) == 2
    assert batch.get_job("queued").lease == T0 + 500
    assert batch.get_job("running").lease == T0 + 500


def test_reads_never_write(store, batch, tmp_path):
    _create(batch, "j1", T0, n=3)
    _create(batch, "j2", T0 + 1, caller="bob")
    _run(batch, "j1", T0 + 2, ["ok"])
    batch.claim("j1", T0 + 5)
    observer = apsw.Connection(str(tmp_path / "sift.db"))
    version = observer.cursor().execute("pragma data_version").fetchone()[0]
    rows = _rows(store)
    changes = (store.db.reader.total_changes(), store.db.writer.total_changes())

    later = T0 + 10 * TTL
    assert batch.get_job("j1") is not None
    assert len(batch.get_targets("j1")) == 3
    assert len(batch.get_targets("j1", results=False)) == 3
    assert batch.get_status("j1") is not None
    assert batch.get_status("j2", results=False) is not None
    assert batch.find_idempotent("alice", "key-j1", T0 + 6, TTL) is not None
    assert batch.find_idempotent("alice", "key-j1", later, TTL) is None
    assert batch.count_live() == 2
    assert batch.count_live("bob") == 1
    assert batch.live_jobs() == ["j1", "j2"]
    assert batch.next_retry_at() is None
    assert batch.gauges() == (2, 1)
    assert batch.batch_nbytes() > 0

    assert _rows(store) == rows
    assert (store.db.reader.total_changes(), store.db.writer.total_changes()) == changes
    assert observer.cursor().execute("pragma data_version").fetchone()[0] == version
    observer.close()


# -- 2. keyed by job id only -----------------------------------------------------------------


def test_accessors_are_keyed_by_job_id_only(batch):
    _create(batch, "a1", T0, caller="alice")
    _create(batch, "b1", T0, caller="bob")
    # Whoever asks, the id alone finds, changes and cancels the job: ownership is the API's job.
    assert batch.get_job("b1").caller == "bob"
    assert batch.update_target("b1", 0, "done", T0 + 1, result="{}")
    assert batch.cancel("b1", T0 + 2).caller == "bob"
    assert batch.get_job("a1").status == "queued"
    for name in (
        "get_job",
        "get_targets",
        "get_status",
        "update_target",
        "set_status",
        "touch",
        "claim",
        "requeue",
        "finish",
        "cancel",
    ):
        params = inspect.signature(getattr(batch, name)).parameters
        assert "caller" not in params and "caller_class" not in params, name
        assert next(iter(params)) == "job_id", name


# -- 3. idempotency lookup -------------------------------------------------------------------


def test_idempotency_lookup_needs_lease_plus_ttl_after_now(batch):
    _create(batch, "j1", T0)
    assert batch.find_idempotent("alice", "key-j1", T0 + 99.5, 100).id == "j1"
    assert batch.find_idempotent("alice", "key-j1", T0 + 100, 100) is None
    assert batch.find_idempotent("alice", "key-j1", T0 + 100.5, 100) is None
    # The lease slides: a touch keeps the job findable.
    batch.touch("j1", T0 + 50)
    assert batch.find_idempotent("alice", "key-j1", T0 + 149.5, 100).id == "j1"
    assert batch.find_idempotent("alice", "key-j1", T0 + 150, 100) is None


def test_idempotency_lookup_is_scoped_to_the_caller(batch):
    _create(batch, "a1", T0, caller="alice", key="same")
    _create(batch, "b1", T0, caller="bob", key="same")
    assert batch.find_idempotent("alice", "same", T0, TTL).id == "a1"
    assert batch.find_idempotent("bob", "same", T0, TTL).id == "b1"
    assert batch.find_idempotent("carol", "same", T0, TTL) is None
    assert batch.find_idempotent("alice", "other", T0, TTL) is None


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
def test_idempotency_lookup_returns_only_queued_running_done_or_partial_jobs(
    batch, outcomes, status, found
):
    _create(batch, "j1", T0)
    if outcomes is None:
        batch.claim("j1", T0 + 1)
    elif outcomes == "restart":
        batch.restart(T0 + 1)
    elif outcomes == "cancel":
        batch.cancel("j1", T0 + 1)
    else:
        _run(batch, "j1", T0 + 1, outcomes)
    assert batch.get_job("j1").status == status
    hit = batch.find_idempotent("alice", "key-j1", T0 + 10, TTL)
    assert (hit.id if hit else None) == ("j1" if found else None)


def test_idempotency_lookup_returns_the_newest_matching_job(batch):
    _create(batch, "old", T0, key="k")
    _create(batch, "new", T0 + 10, key="k")
    assert batch.find_idempotent("alice", "k", T0 + 20, TTL).id == "new"
    # Created in the same second: the later insert is the newer one.
    _create(batch, "newer", T0 + 10, key="k")
    assert batch.find_idempotent("alice", "k", T0 + 20, TTL).id == "newer"
    # A newest job that may not be reused does not hide an older one that may.
    batch.cancel("newer", T0 + 21)
    batch.cancel("new", T0 + 21)
    assert batch.find_idempotent("alice", "k", T0 + 22, TTL).id == "old"


# -- 4. targets ------------------------------------------------------------------------------


def test_targets_come_back_in_numeric_idx_order(batch):
    _create(batch, "j1", T0, n=12)
    expected = list(range(12))  # lexical order would put 10 and 11 after 1
    assert [t.idx for t in batch.get_targets("j1")] == expected
    assert [t.url for t in batch.get_targets("j1")] == [f"http://127.0.0.1:9/{i}" for i in expected]
    _, targets = batch.get_status("j1")
    assert [t.idx for t in targets] == expected
    _, targets = batch.get_status("j1", results=False)
    assert [t.idx for t in targets] == expected


def test_targets_without_results_keep_status_error_and_hint(batch):
    _create(batch, "j1", T0, n=2)
    batch.update_target("j1", 0, "done", T0 + 1, result='{"content": "x"}')
    batch.update_target("j1", 1, "failed", T0 + 2, error="nope", hint="retry")
    full = batch.get_targets("j1")
    light = batch.get_targets("j1", results=False)
    assert full[0].result == '{"content": "x"}'
    assert [t.result for t in light] == [None, None]
    assert [(t.idx, t.url, t.status, t.error, t.hint) for t in light] == [
        (t.idx, t.url, t.status, t.error, t.hint) for t in full
    ]


def test_finishing_a_target_counts_into_targets_done_exactly_once(batch):
    _create(batch, "j1", T0, n=3)
    batch.update_target("j1", 0, "done", T0 + 1, result='{"v": 1}')
    assert batch.get_job("j1").targets_done == 1
    batch.update_target("j1", 0, "done", T0 + 2, result='{"v": 2}')
    batch.update_target("j1", 0, "failed", T0 + 3, error="later")
    assert batch.get_job("j1").targets_done == 1
    batch.update_target("j1", 1, "running", T0 + 4)
    assert batch.get_job("j1").targets_done == 1
    batch.update_target("j1", 1, "failed", T0 + 5, error="x")
    assert batch.get_job("j1").targets_done == 2


def test_a_target_finished_again_after_being_reset_still_counts_once(batch):
    _create(batch, "j1", T0, n=2)
    batch.update_target("j1", 0, "done", T0 + 1, result='{"v": 1}')
    batch.update_target("j1", 0, "pending", T0 + 2)
    batch.update_target("j1", 0, "done", T0 + 3, result='{"v": 1}')
    job = batch.get_job("j1")
    assert job.targets_done == 1
    assert job.targets_done <= job.targets_total


def test_finishing_a_target_bumps_the_lease(batch):
    _create(batch, "j1", T0)
    batch.update_target("j1", 1, "failed", T0 + 42, error="e")
    assert batch.get_job("j1").lease == T0 + 42
    batch.update_target("j1", 0, "done", T0 + 43.5, result="{}")
    assert batch.get_job("j1").lease == T0 + 43.5


def test_finishing_a_target_adds_the_utf8_byte_length_of_its_result_to_nbytes(batch):
    _create(batch, "j1", T0, n=3)
    first = json.dumps({"content": "café 🙂"}, ensure_ascii=False)
    second = json.dumps({"content": "ascii only"})
    assert len(first.encode()) > len(first)
    batch.update_target("j1", 0, "done", T0 + 1, result=first)
    assert batch.get_job("j1").nbytes == len(first.encode())
    batch.update_target("j1", 1, "done", T0 + 2, result=second)
    assert batch.get_job("j1").nbytes == len(first.encode()) + len(second.encode())
    batch.update_target("j1", 2, "failed", T0 + 3, error="no result", hint="h")
    assert batch.get_job("j1").nbytes == len(first.encode()) + len(second.encode())
    assert batch.batch_nbytes() == len(first.encode()) + len(second.encode())


def test_rewriting_a_finished_target_replaces_its_bytes_instead_of_adding(batch):
    _create(batch, "j1", T0)
    batch.update_target("j1", 0, "done", T0 + 1, result="x" * 100)
    batch.update_target("j1", 0, "done", T0 + 2, result="y" * 30)
    assert batch.get_job("j1").nbytes == 30
    assert batch.get_targets("j1")[0].result == "y" * 30


# -- 5. sweep --------------------------------------------------------------------------------


def test_sweep_deletes_every_job_whose_lease_plus_ttl_is_not_after_now_with_its_targets(
    store, batch
):
    _create(batch, "old-live", T0)  # still queued: sweep goes by time alone
    _create(batch, "old-done", T0 + 10)
    _run(batch, "old-done", T0 + 10, ["ok", "ok"])  # lease T0 + 12
    _create(batch, "boundary", T0 + 50)
    _create(batch, "just-alive", T0 + 50.5)
    _create(batch, "fresh", T0 + 90)
    assert batch.sweep(T0 + 150, 100) == 3
    remaining = {j[0] for j in _rows(store)[0]}
    assert remaining == {"just-alive", "fresh"}
    for gone in ("old-live", "old-done", "boundary"):
        assert _target_count(store, gone) == 0
        assert batch.get_job(gone) is None
    assert _target_count(store, "fresh") == 2
    assert batch.sweep(T0 + 150, 100) == 0


# -- 6. byte budget --------------------------------------------------------------------------


def _finished_job(batch, job_id, created, nbytes, lease):
    _create(batch, job_id, created, n=1)
    batch.update_target(job_id, 0, "done", created, result="r" * nbytes)
    batch.set_status(job_id, "done", lease)


def test_evict_oldest_removes_whole_jobs_oldest_lease_first_until_within_budget(store, batch):
    _finished_job(batch, "x", T0, 100, lease=T0 + 300)  # oldest created, newest lease
    _finished_job(batch, "y", T0 + 10, 100, lease=T0 + 100)
    _finished_job(batch, "z", T0 + 20, 100, lease=T0 + 200)
    assert batch.evict_oldest(300) == 0  # exactly at the budget is within it
    assert batch.evict_oldest(150) == 2
    assert {j[0] for j in _rows(store)[0]} == {"x"}
    assert _target_count(store, "y") == _target_count(store, "z") == 0
    assert batch.batch_nbytes() == 100


def test_evict_oldest_never_removes_a_queued_or_running_job_even_over_budget(store, batch):
    _create(batch, "running", T0, n=2)
    batch.claim("running", T0)
    batch.finish("running", 0, status="done", outcome="ok", seconds=1, now=T0 + 1, result="r" * 500)
    _create(batch, "queued", T0 + 1, n=1)
    batch.update_target("queued", 0, "done", T0 + 1, result="q" * 300)  # bytes, still queued
    _finished_job(batch, "done", T0 + 2, 10, lease=T0 + 500)
    assert batch.evict_oldest(100) == 1
    assert {j[0] for j in _rows(store)[0]} == {"running", "queued"}
    assert batch.batch_nbytes() == 800  # still over budget: nothing else may go
    assert batch.evict_oldest(100) == 0


def test_batch_bytes_are_separate_from_the_content_cache(tmp_path):
    store = Store(Database(tmp_path / "sift.db"), cache_max_bytes=1000)
    try:
        _finished_job(store.batch, "j1", T0, 100, lease=T0 + 1)
        body = b"b" * 900
        store.cache.put("fleet", CachedResponse("u", "u", 200, "text/html", body, T0), T0)
        assert store.batch.batch_nbytes() == 100
        assert store.cache.total_bytes() == 900
        # The content cache's eviction does not touch batch jobs, and the other way round.
        store.cache.put("fleet", CachedResponse("v", "v", 200, "text/html", body, T0), T0 + 1)
        assert store.batch.get_job("j1") is not None
        assert store.batch.evict_oldest(150) == 0
        assert store.cache.total_bytes() == 900
        assert store.batch.evict_oldest(50) == 1
        assert store.cache.total_bytes() == 900
    finally:
        store.close()


# -- 7. restart hook -------------------------------------------------------------------------


def test_mark_in_flight_failed_fails_every_live_job_and_leaves_terminal_ones(batch):
    _create(batch, "queued", T0)
    _create(batch, "running", T0)
    batch.claim("running", T0 + 1)
    terminal = {}
    runs = {"done": ["ok", "ok"], "partial": ["ok", "x"], "failed": ["x", "x"]}
    for job_id, outcomes in runs.items():
        _create(batch, job_id, T0)
        _run(batch, job_id, T0 + 1, outcomes)
        terminal[job_id] = batch.get_job(job_id)
    _create(batch, "cancelled", T0)
    batch.cancel("cancelled", T0 + 3)
    terminal["cancelled"] = batch.get_job("cancelled")

    assert batch.mark_in_flight_failed("worker went away", T0 + 1000) == 2
    for job_id in ("queued", "running"):
        job = batch.get_job(job_id)
        assert (job.status, job.error, job.lease) == ("failed", "worker went away", T0 + 1000)
    for job_id, before in terminal.items():
        assert batch.get_job(job_id) == before
    assert batch.mark_in_flight_failed("again", T0 + 2000) == 0
    assert batch.get_job("queued").error == "worker went away"


def test_mark_in_flight_failed_puts_running_targets_back_to_pending_and_keeps_finished_ones(
    batch,
):
    _create(batch, "j1", T0, n=3)
    _run(batch, "j1", T0, ["ok"])
    batch.claim("j1", T0 + 5)
    batch.mark_in_flight_failed("restart", T0 + 10)
    targets = batch.get_targets("j1")
    assert [t.status for t in targets] == ["done", "pending", "pending"]
    assert targets[0].result is not None
    assert batch.get_job("j1").targets_done == 1
    assert batch.gauges() == (0, 0)


def test_restart_returns_a_cancelled_jobs_stale_in_flight_target_to_pending(batch):
    _create(batch, "j1", T0, n=2)
    batch.claim("j1", T0 + 1)
    batch.cancel("j1", T0 + 2)  # the worker dies before storing the in-flight target
    batch.restart(T0 + 10)
    assert [t.status for t in batch.get_targets("j1")] == ["pending", "pending"]
    assert batch.get_job("j1").status == "cancelled"
    assert batch.gauges() == (0, 0)


# -- 8. misses -------------------------------------------------------------------------------


def test_accessors_never_raise_on_a_miss(batch):
    _create(batch, "j1", T0, n=1)
    assert batch.get_job("nope") is None
    assert batch.get_targets("nope") == []
    assert batch.get_status("nope") is None
    assert batch.find_idempotent("alice", "nope", T0, TTL) is None
    assert batch.count_live("nobody") == 0
    assert batch.update_target("nope", 0, "done", T0, result="{}") is False
    assert batch.update_target("j1", 7, "done", T0, result="{}") is False
    assert batch.set_status("nope", "done", T0) is False
    assert batch.touch("nope", T0) is False
    assert batch.claim("nope", T0) is None
    assert batch.requeue("nope", 0, retry_at=T0, busy_since=T0, now=T0) is False
    assert batch.finish("nope", 0, status="done", outcome="ok", seconds=0, now=T0) == Finished(
        False
    )
    assert batch.cancel("nope", T0) is None
    assert batch.get_job("j1").lease == T0  # a miss on a neighbour changes nothing


# -- submit ----------------------------------------------------------------------------------


def test_submit_creates_a_queued_job_with_pending_targets_and_counts_created(store, batch):
    out = _submit(batch, "j1", T0, n=3)
    assert out.kind == "created"
    assert out.job == batch.get_job("j1")
    assert (out.job.status, out.job.created_at, out.job.lease, out.job.targets_total) == (
        "queued",
        T0,
        T0,
        3,
    )
    assert [t.status for t in batch.get_targets("j1")] == ["pending"] * 3
    assert _counter(store, JOBS_TOTAL, "created") == 1


def test_submit_with_a_known_idempotency_key_returns_the_existing_job_and_counts_reused(
    store, batch
):
    first = _submit(batch, "j1", T0, key="k", jobs_per_caller=1)
    # No caps for a reuse: the caller already has its one live job, and the list is over cap.
    again = _submit(batch, "j2", T0 + 5, key="k", jobs_per_caller=1, targets_per_job=1)
    assert again.kind == "reused"
    assert again.job.id == "j1"
    assert again.job == first.job  # reuse does not slide the lease
    assert batch.get_job("j2") is None
    assert batch.count_live() == 1
    assert _counter(store, JOBS_TOTAL, "created") == 1
    assert _counter(store, JOBS_TOTAL, "reused") == 1


def test_submit_checks_caps_in_order_too_many_then_caller_busy_then_jobs_busy(store, batch):
    assert _submit(batch, "a1", T0, caller="alice").kind == "created"
    assert _submit(batch, "b1", T0, caller="bob").kind == "created"
    caps = {"targets_per_job": 2, "jobs_per_caller": 1, "jobs_total": 2}
    assert _submit(batch, "x", T0 + 1, n=3, caller="alice", **caps).kind == "too_many"
    assert _submit(batch, "x", T0 + 1, n=2, caller="alice", **caps).kind == "caller_busy"
    assert _submit(batch, "x", T0 + 1, n=2, caller="carol", **caps).kind == "jobs_busy"
    assert batch.get_job("x") is None
    assert _counter(store, JOBS_TOTAL, "created") == 2
    assert _counter(store, JOBS_TOTAL, "reused") == 0


def test_submit_caps_are_inclusive_and_count_only_live_jobs(batch):
    caps = {"targets_per_job": 3, "jobs_per_caller": 2, "jobs_total": 3}
    assert _submit(batch, "a1", T0, n=3, caller="alice", **caps).kind == "created"
    assert _submit(batch, "a2", T0, n=1, caller="alice", **caps).kind == "created"
    assert _submit(batch, "a3", T0, n=1, caller="alice", **caps).kind == "caller_busy"
    assert _submit(batch, "b1", T0, n=1, caller="bob", **caps).kind == "created"
    assert _submit(batch, "c1", T0, n=1, caller="carol", **caps).kind == "jobs_busy"
    _run(batch, "a1", T0 + 1, ["ok", "ok", "ok"])  # done: no longer live
    batch.cancel("b1", T0 + 1)
    assert _submit(batch, "a3", T0 + 2, n=1, caller="alice", **caps).kind == "created"
    assert _submit(batch, "c1", T0 + 2, n=1, caller="carol", **caps).kind == "created"


def test_submit_sweeps_expired_jobs(batch):
    _submit(batch, "old", T0, ttl=100)
    _run(batch, "old", T0, ["ok", "ok"])  # lease T0 + 2
    _submit(batch, "kept", T0 + 50, ttl=100)
    assert _submit(batch, "new", T0 + 102, ttl=100).kind == "created"
    assert batch.get_job("old") is None
    assert batch.get_job("kept") is not None
    assert batch.get_job("new") is not None


# -- claim -----------------------------------------------------------------------------------


def test_first_claim_sets_the_job_running_and_takes_target_zero(batch):
    _create(batch, "j1", T0, caller="bob", caller_class="restricted")
    claim = batch.claim("j1", T0 + 3)
    assert (claim.job_id, claim.idx, claim.url, claim.caller, claim.caller_class) == (
        "j1",
        0,
        "http://127.0.0.1:9/0",
        "bob",
        "restricted",
    )
    assert json.loads(claim.options) == {"mode": "clean", "n": 0}
    assert claim.busy_since is None
    job = batch.get_job("j1")
    assert (job.status, job.started_at, job.lease, job.created_at) == (
        "running",
        T0 + 3,
        T0 + 3,
        T0,
    )
    assert [t.status for t in batch.get_targets("j1")] == ["running", "pending"]


def test_claim_is_serial_no_target_while_one_is_running(batch):
    _create(batch, "j1", T0, n=3)
    assert batch.claim("j1", T0 + 1).idx == 0
    assert batch.claim("j1", T0 + 2) is None
    batch.finish("j1", 0, status="done", outcome="ok", seconds=1, now=T0 + 3, result="{}")
    second = batch.claim("j1", T0 + 4)
    assert second.idx == 1
    job = batch.get_job("j1")
    assert (job.status, job.started_at, job.lease) == ("running", T0 + 1, T0 + 4)


def test_claim_respects_the_retry_time_of_a_requeued_target(batch):
    _create(batch, "j1", T0, n=1)
    batch.claim("j1", T0)
    assert batch.requeue("j1", 0, retry_at=T0 + 2, busy_since=T0, now=T0 + 0.5)
    assert batch.claim("j1", T0 + 1.999) is None
    again = batch.claim("j1", T0 + 2)
    assert (again.idx, again.busy_since) == (0, T0)


def test_claim_never_skips_a_target_waiting_to_retry(batch):
    _create(batch, "j1", T0, n=3)
    batch.claim("j1", T0)
    batch.requeue("j1", 0, retry_at=T0 + 2, busy_since=T0, now=T0 + 0.5)
    assert batch.claim("j1", T0 + 1) is None
    assert batch.claim("j1", T0 + 2).idx == 0


def test_schema_keeps_large_values_in_the_last_column(store):
    def last_column(table):
        return store.db.read(lambda c: [r[1] for r in c.execute(f"pragma table_info({table})")][-1])

    assert (
        last_column("batch_target"),
        last_column("content_cache"),
        last_column("digest_cache"),
    ) == (
        "result",
        "body",
        "value",
    )


def test_claim_takes_nothing_from_cancelled_or_finished_jobs(batch):
    _create(batch, "cancelled", T0)
    batch.cancel("cancelled", T0 + 1)
    _create(batch, "failed", T0)
    batch.restart(T0 + 1)
    _create(batch, "done", T0 + 2, n=1)
    _run(batch, "done", T0 + 2, ["ok"])
    for job_id in ("cancelled", "failed", "done"):
        before = batch.get_job(job_id)
        assert batch.claim(job_id, T0 + 10) is None
        assert batch.get_job(job_id) == before
    assert [t.status for t in batch.get_targets("cancelled")] == ["pending", "pending"]


# -- requeue ---------------------------------------------------------------------------------


def test_requeue_returns_a_running_target_to_pending_with_its_retry_time(batch):
    _create(batch, "j1", T0)
    batch.claim("j1", T0 + 1)
    assert batch.requeue("j1", 0, retry_at=T0 + 5, busy_since=T0 + 1, now=T0 + 3)
    target = batch.get_targets("j1")[0]
    assert (target.status, target.retry_at, target.busy_since) == ("pending", T0 + 5, T0 + 1)
    job = batch.get_job("j1")
    assert (job.status, job.lease, job.targets_done) == ("running", T0 + 3, 0)
    assert batch.next_retry_at() == T0 + 5
    # Only a running target goes back: a second requeue changes nothing.
    assert not batch.requeue("j1", 0, retry_at=T0 + 9, busy_since=T0, now=T0 + 4)
    assert batch.get_targets("j1")[0].retry_at == T0 + 5
    assert batch.get_job("j1").lease == T0 + 3


def test_next_retry_at_is_the_earliest_waiting_target_of_a_live_job(batch):
    assert batch.next_retry_at() is None
    for job_id, retry in (("a", T0 + 30), ("b", T0 + 20), ("c", T0 + 10)):
        _create(batch, job_id, T0)
        batch.claim(job_id, T0)
        batch.requeue(job_id, 0, retry_at=retry, busy_since=T0, now=T0)
    batch.cancel("c", T0 + 1)
    assert batch.next_retry_at() == T0 + 20


# -- finish ----------------------------------------------------------------------------------


def _bucket_counts(store, name) -> dict[str, float]:
    """sum, count and the cumulative `le=` counts Prometheus shows for a histogram."""
    rows = store.read_counters()
    bounds = BYTES_BUCKETS if name.endswith("_bytes") else SECONDS_BUCKETS
    counts = {f"le={b}": v for b, v in cumulative(rows, name, bounds)}
    return {
        **counts,
        **{lbl: v for (n, lbl), v in rows.items() if n == name and not lbl.startswith("bucket=")},
    }


def test_finish_sets_done_when_every_target_is_done_with_its_metrics(store, batch):
    _create(batch, "j1", T0, n=2)
    results = [_run(batch, "j1", T0 + 10, ["ok"], step=0.25)[0]]
    results += _run(batch, "j1", T0 + 20, ["ok"], step=0.25)
    assert results == [Finished(True, None), Finished(True, "done")]
    job = batch.get_job("j1")
    assert (job.status, job.targets_done, job.lease) == ("done", 2, T0 + 20.25)
    assert _counter(store, JOBS_TOTAL, "done") == 1
    assert _counter(store, TARGETS_TOTAL, "ok") == 2
    job_hist = _bucket_counts(store, "sift_batch_job_seconds")
    assert job_hist["count"] == 1
    assert job_hist["sum"] == 20.25
    for le in SECONDS_BUCKETS:
        assert job_hist.get(f"le={le}", 0) == (1 if le >= 20.25 else 0)
    assert job_hist["le=+Inf"] == 1
    target_hist = _bucket_counts(store, "sift_batch_target_seconds")
    assert (target_hist["count"], target_hist["sum"]) == (2, 0.5)
    assert (target_hist["le=0.25"], target_hist.get("le=0.1", 0)) == (2, 0)
    nbytes = len(batch.get_targets("j1")[0].result.encode())
    bytes_hist = _bucket_counts(store, "sift_batch_result_bytes")
    assert (bytes_hist["count"], bytes_hist["sum"]) == (2, 2 * nbytes)
    assert bytes_hist[f"le={BYTES_BUCKETS[0]}"] == 2


def test_finish_sets_failed_when_every_target_failed(store, batch):
    _create(batch, "j1", T0, n=2)
    assert _run(batch, "j1", T0, ["timeout", "blocked"])[-1] == Finished(True, "failed")
    job = batch.get_job("j1")
    assert (job.status, job.error, job.nbytes) == ("failed", "", 0)
    targets = batch.get_targets("j1")
    assert [(t.status, t.error, t.hint) for t in targets] == [
        ("failed", "timeout error", "retry"),
        ("failed", "blocked error", "retry"),
    ]
    assert _counter(store, JOBS_TOTAL, "failed") == 1
    assert _counter(store, TARGETS_TOTAL, "timeout") == 1
    assert _counter(store, TARGETS_TOTAL, "blocked") == 1
    assert _bucket_counts(store, "sift_batch_result_bytes").get("count", 0) == 0


def test_finish_sets_partial_for_a_mix_of_done_and_failed(store, batch):
    _create(batch, "j1", T0, n=3)
    assert _run(batch, "j1", T0, ["ok", "upstream_5xx", "ok"])[-1] == Finished(True, "partial")
    assert batch.get_job("j1").status == "partial"
    assert _counter(store, JOBS_TOTAL, "partial") == 1
    assert _counter(store, TARGETS_TOTAL, "ok") == 2
    assert _counter(store, TARGETS_TOTAL, "upstream_5xx") == 1


def test_finish_sets_the_terminal_status_exactly_once(store, batch):
    _create(batch, "j1", T0, n=1)
    assert _run(batch, "j1", T0, ["ok"]) == [Finished(True, "done")]
    # The target is no longer running: storing it again is refused and counts nothing.
    again = batch.finish("j1", 0, status="failed", outcome="timeout", seconds=1, now=T0 + 9)
    assert again == Finished(False)
    assert batch.get_job("j1").status == "done"
    assert batch.get_targets("j1")[0].status == "done"
    counters = store.read_counters()
    assert counters[(JOBS_TOTAL, "done")] == 1
    assert (JOBS_TOTAL, "failed") not in counters
    assert (TARGETS_TOTAL, "timeout") not in counters
    assert _bucket_counts(store, "sift_batch_job_seconds")["count"] == 1


def test_finish_stores_only_a_running_target(store, batch):
    _create(batch, "j1", T0, n=2)
    before = _rows(store)
    assert batch.finish("j1", 1, status="done", outcome="ok", seconds=1, now=T0 + 1) == Finished(
        False
    )
    assert _rows(store) == before
    assert store.read_counters() == {}


def test_finish_never_overwrites_cancelled(store, batch):
    _create(batch, "j1", T0, n=2)
    batch.claim("j1", T0 + 1)
    batch.cancel("j1", T0 + 2)
    res = batch.finish("j1", 0, status="done", outcome="ok", seconds=1, now=T0 + 3, result="{}")
    assert res == Finished(True, None)
    assert batch.claim("j1", T0 + 4) is None  # no further target starts
    job = batch.get_job("j1")
    assert (job.status, job.targets_done, job.lease) == ("cancelled", 1, T0 + 3)
    assert [t.status for t in batch.get_targets("j1")] == ["done", "pending"]
    # Even when the in-flight target was the last one, cancelled stays.
    _create(batch, "j2", T0, n=1)
    batch.claim("j2", T0 + 1)
    batch.cancel("j2", T0 + 2)
    assert batch.finish("j2", 0, status="failed", outcome="timeout", seconds=1, now=T0 + 3) == (
        Finished(True, None)
    )
    assert batch.get_job("j2").status == "cancelled"
    counters = store.read_counters()
    assert counters[(JOBS_TOTAL, "cancelled")] == 2
    assert not {"done", "failed", "partial"} & {lbl for n, lbl in counters if n == JOBS_TOTAL}


def test_finish_folds_an_unknown_outcome_to_other(store, batch):
    _create(batch, "j1", T0, n=1)
    _run(batch, "j1", T0, ["made up outcome"])
    assert _counter(store, TARGETS_TOTAL, "other") == 1
    assert (TARGETS_TOTAL, "made up outcome") not in store.read_counters()


def _done_then_claim(batch, claim, then_claim):
    """Store `claim` done at T0 + 2, claiming from `then_claim` in the same transaction."""
    return batch.finish(
        claim.job_id,
        claim.idx,
        status="done",
        outcome="ok",
        seconds=1,
        now=T0 + 2,
        result="{}",
        then_claim=then_claim,
    )


def test_finish_then_claim_takes_the_first_ready_job_in_the_same_transaction(batch):
    _create(batch, "a", T0)
    _create(batch, "busy", T0)
    _create(batch, "b", T0)
    claim = batch.claim("a", T0 + 1)
    batch.claim("busy", T0 + 1)  # has a target in flight: not ready
    res = _done_then_claim(batch, claim, ["busy", "b", "a"])
    assert res.stored and res.next is not None
    assert (res.next.job_id, res.next.idx) == ("b", 0)
    job = batch.get_job("b")
    assert (job.status, job.lease) == ("running", T0 + 2)
    assert [t.status for t in batch.get_targets("b")] == ["running", "pending"]
    assert [t.status for t in batch.get_targets("a")] == ["done", "pending"]


def test_finish_then_claim_may_take_the_same_jobs_next_target(batch):
    _create(batch, "a", T0)
    claim = batch.claim("a", T0 + 1)
    res = _done_then_claim(batch, claim, ["a"])
    assert (res.next.job_id, res.next.idx) == ("a", 1)
    assert [t.status for t in batch.get_targets("a")] == ["done", "running"]


def test_finish_then_claim_takes_nothing_when_no_job_is_ready(batch):
    _create(batch, "a", T0, n=1)
    claim = batch.claim("a", T0 + 1)
    res = _done_then_claim(batch, claim, ["a", "unknown"])
    assert res == Finished(True, "done")  # the job ended; nothing was claimed


# -- cancel ----------------------------------------------------------------------------------


def test_cancel_flips_a_live_job_and_returns_it_as_it_was(store, batch):
    _create(batch, "queued", T0)
    _create(batch, "running", T0)
    batch.claim("running", T0 + 1)
    prior = batch.cancel("queued", T0 + 5)
    assert (prior.status, prior.lease) == ("queued", T0)
    prior = batch.cancel("running", T0 + 6)
    assert (prior.status, prior.lease) == ("running", T0 + 1)
    for job_id, now in (("queued", T0 + 5), ("running", T0 + 6)):
        job = batch.get_job(job_id)
        assert (job.status, job.lease) == ("cancelled", now)
    assert _counter(store, JOBS_TOTAL, "cancelled") == 2
    assert batch.count_live() == 0


def test_cancel_is_counted_once_and_leaves_finished_jobs_alone(store, batch):
    _create(batch, "j1", T0)
    batch.cancel("j1", T0 + 1)
    again = batch.cancel("j1", T0 + 2)
    assert (again.status, again.lease) == ("cancelled", T0 + 1)
    assert batch.get_job("j1").lease == T0 + 1
    _create(batch, "done", T0, n=1)
    _run(batch, "done", T0, ["ok"])
    before = batch.get_job("done")
    assert batch.cancel("done", T0 + 9) == before
    assert batch.get_job("done") == before
    assert _counter(store, JOBS_TOTAL, "cancelled") == 1


# -- restart, gauges, rotation ---------------------------------------------------------------


def test_restart_fails_in_flight_jobs_with_restart_and_counts_each(store, batch):
    for job_id in ("a", "b", "c"):
        _create(batch, job_id, T0)
    batch.claim("b", T0 + 1)
    _create(batch, "done", T0, n=1)
    _run(batch, "done", T0, ["ok"])
    assert batch.restart(T0 + 10) == 3
    assert {batch.get_job(j).error for j in ("a", "b", "c")} == {"restart"}
    assert {batch.get_job(j).status for j in ("a", "b", "c")} == {"failed"}
    assert batch.get_job("done").status == "done"
    assert _counter(store, JOBS_TOTAL, "restart") == 3
    assert batch.restart(T0 + 20) == 0
    assert _counter(store, JOBS_TOTAL, "restart") == 3
    # A restart-failed job is not a finished-by-targets failure.
    assert _counter(store, JOBS_TOTAL, "failed") == 0


def test_gauges_count_live_jobs_and_running_targets(batch):
    assert batch.gauges() == (0, 0)
    _create(batch, "q1", T0)
    _create(batch, "q2", T0)
    _create(batch, "r1", T0)
    batch.claim("r1", T0 + 1)
    _create(batch, "done", T0, n=1)
    _run(batch, "done", T0, ["ok"])
    assert batch.gauges() == (3, 1)
    batch.cancel("r1", T0 + 2)  # its target is still in flight until stored
    assert batch.gauges() == (2, 1)
    batch.finish("r1", 0, status="done", outcome="ok", seconds=1, now=T0 + 3, result="{}")
    assert batch.gauges() == (2, 0)


def test_live_jobs_are_in_submit_order_and_only_live(batch):
    _create(batch, "late", T0 + 20)
    _create(batch, "early", T0)
    _create(batch, "mid-b", T0 + 10)
    _create(batch, "mid-a", T0 + 10)  # same second: insert order
    _create(batch, "gone", T0 + 5)
    batch.cancel("gone", T0 + 30)
    batch.claim("mid-a", T0 + 31)
    assert batch.live_jobs() == ["early", "mid-b", "mid-a", "late"]
