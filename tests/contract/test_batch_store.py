"""The batch store's rules (docs/WORKER.md §The store's transactions, docs/API.md §Job
lifetime), each asserted on both engines. Time is always passed as `now`."""

from __future__ import annotations

import asyncio
import json

from sift.constants import BYTES_BUCKETS, SECONDS_BUCKETS
from sift.store.records import ListPosition
from sift.store.series import (
    JOB_SECONDS,
    JOBS_TOTAL,
    RESULT_BYTES,
    TARGET_SECONDS,
    TARGETS_TOTAL,
)
from tests.storekit import TTL
from tests.storekit import submit as _submit

T0 = 1_700_000_000.0


async def _finish(batch, job_id, idx, now, status="done", **kw):
    kw.setdefault("result", "{}" if status == "done" else None)
    kw.setdefault("error", None if status == "done" else "boom")
    return await batch.finish(
        job_id, idx, status=status, outcome="ok" if status == "done" else "upstream_5xx",
        seconds=0.5, now=now, **kw,
    )  # fmt: skip


async def _run(batch, job_id, now, outcomes):
    for outcome in outcomes:
        claim = await batch.claim(job_id, now)
        await _finish(batch, job_id, claim.idx, now, "done" if outcome == "ok" else "failed")


# -- submit ----------------------------------------------------------------------------------


async def test_submit_creates_a_queued_job_with_pending_targets_and_counts_created(engine):
    out = await _submit(engine.batch, "j1", T0, n=3)
    assert out.kind == "created"
    assert out.job == await engine.batch.job("j1")
    assert (out.job.status, out.job.created_at, out.job.lease, out.job.targets_total) == (
        "queued", T0, T0, 3,
    )  # fmt: skip
    _, targets = await engine.batch.status("j1")
    assert [t.status for t in targets] == ["pending"] * 3
    assert [t.idx for t in targets] == [0, 1, 2]
    assert await engine.counter(JOBS_TOTAL, "created") == 1


async def test_submit_with_a_known_list_returns_the_existing_job_and_counts_reused(engine):
    first = await _submit(engine.batch, "j1", T0, key="k", jobs_per_caller=1)
    again = await _submit(engine.batch, "j2", T0 + 5, key="k", jobs_per_caller=1)
    assert (again.kind, again.job) == ("reused", first.job)
    assert await engine.batch.job("j2") is None
    assert await engine.counter(JOBS_TOTAL, "reused") == 1


async def test_submit_reuse_is_scoped_to_the_caller(engine):
    await _submit(engine.batch, "j1", T0, key="k", caller="alice")
    assert (await _submit(engine.batch, "j2", T0, key="k", caller="bob")).kind == "created"


async def test_submit_checks_caps_in_order_too_many_then_caller_busy_then_jobs_busy(engine):
    assert (await _submit(engine.batch, "a1", T0, caller="alice")).kind == "created"
    assert (await _submit(engine.batch, "b1", T0, caller="bob")).kind == "created"
    caps = {"targets_per_job": 2, "jobs_per_caller": 1, "jobs_total": 2}
    assert (await _submit(engine.batch, "x", T0, n=3, caller="alice", **caps)).kind == "too_many"
    assert (await _submit(engine.batch, "x", T0, caller="alice", **caps)).kind == "caller_busy"
    assert (await _submit(engine.batch, "x", T0, caller="carol", **caps)).kind == "jobs_busy"
    assert await engine.batch.job("x") is None


async def test_the_caller_cap_counts_the_callers_live_jobs_of_its_own_class(engine):
    caps = {"jobs_per_caller": 1}
    assert (await _submit(engine.batch, "f1", T0, **caps)).kind == "created"
    assert (await _submit(engine.batch, "f2", T0, **caps)).kind == "caller_busy"
    other = await _submit(engine.batch, "r1", T0 + 1, caller_class="restricted", **caps)
    assert other.kind == "created"
    again = await _submit(engine.batch, "r2", T0 + 2, caller_class="restricted", **caps)
    assert (again.kind, again.live_job) == ("caller_busy", "r1")  # its own class's job


async def test_submit_caps_are_inclusive_and_count_only_live_jobs(engine):
    caps = {"targets_per_job": 3, "jobs_per_caller": 2, "jobs_total": 3}
    b = engine.batch
    assert (await _submit(b, "a1", T0, n=3, caller="alice", **caps)).kind == "created"
    assert (await _submit(b, "a2", T0, n=1, caller="alice", **caps)).kind == "created"
    assert (await _submit(b, "a3", T0, n=1, caller="alice", **caps)).kind == "caller_busy"
    assert (await _submit(b, "b1", T0, n=1, caller="bob", **caps)).kind == "created"
    assert (await _submit(b, "c1", T0, n=1, caller="carol", **caps)).kind == "jobs_busy"
    await _run(b, "a1", T0 + 1, ["ok", "ok", "ok"])  # done: no longer live
    await b.cancel("b1", T0 + 1)
    assert (await _submit(b, "a3", T0 + 2, n=1, caller="alice", **caps)).kind == "created"
    assert (await _submit(b, "c1", T0 + 2, n=1, caller="carol", **caps)).kind == "created"


async def test_identical_concurrent_submits_create_one_job(engine, request, tmp_path):
    """Several processes (here: several connections) submitting the same list at once."""
    from tests.contract.conftest import open_engine

    others = [await open_engine(engine.name, request, tmp_path) for _ in range(3)]
    try:
        outs = await asyncio.gather(
            *[
                _submit(e.batch, f"j{i}", T0, key="same")
                for i, e in enumerate([engine, *others] * 3)
            ]
        )
    finally:
        for e in others:
            await e.close()
    assert sorted(o.kind for o in outs).count("created") == 1
    assert len({o.job.id for o in outs}) == 1
    assert await engine.counter(JOBS_TOTAL, "reused") == len(outs) - 1


async def test_concurrent_submits_never_exceed_the_total_cap(engine, request, tmp_path):
    from tests.contract.conftest import open_engine

    others = [await open_engine(engine.name, request, tmp_path) for _ in range(3)]
    try:
        outs = await asyncio.gather(
            *[
                _submit(e.batch, f"j{i}", T0, caller=f"c{i}", jobs_total=5)
                for i, e in enumerate([engine, *others] * 4)
            ]
        )
    finally:
        for e in others:
            await e.close()
    assert [o.kind for o in outs].count("created") == 5
    assert [o.kind for o in outs].count("jobs_busy") == len(outs) - 5
    assert len(await engine.batch.live_jobs()) == 5


async def test_submit_sweeps_expired_jobs(engine):
    await _submit(engine.batch, "old", T0, ttl=100)
    await _run(engine.batch, "old", T0, ["ok", "ok"])
    await _submit(engine.batch, "kept", T0 + 50, ttl=100)
    assert (await _submit(engine.batch, "new", T0 + 100, ttl=100)).kind == "created"
    assert await engine.batch.job("old") is None
    assert await engine.batch.job("kept") is not None


async def test_a_live_job_past_its_lease_is_not_reused_and_gives_way_to_a_new_one(engine):
    await _submit(engine.batch, "stale", T0, key="k", ttl=100)  # queued, never drained
    out = await _submit(engine.batch, "fresh", T0 + 100, key="k", ttl=100)
    assert (out.kind, out.job.id) == ("created", "fresh")
    assert await engine.batch.job("stale") is None  # swept by that submit
    assert await engine.batch.live_jobs() == ["fresh"]


async def test_sweep_deletes_every_job_whose_lease_plus_ttl_is_not_after_now(engine):
    b = engine.batch
    await _submit(b, "old-live", T0)  # still queued: sweep goes by time alone
    await _submit(b, "old-done", T0 + 10)
    await _run(b, "old-done", T0 + 10, ["ok", "ok"])
    await _submit(b, "boundary", T0 + 50)  # lease + ttl == now: gone
    await _submit(b, "just-alive", T0 + 50.5)
    assert await b.sweep(T0 + 150, 100) == 3
    for gone in ("old-live", "old-done", "boundary"):
        assert await b.status(gone) is None  # its targets went with it
    assert len((await b.status("just-alive"))[1]) == 2
    assert await b.sweep(T0 + 150, 100) == 0


# -- claim -----------------------------------------------------------------------------------


async def test_first_claim_sets_the_job_running_and_takes_target_zero(engine):
    await _submit(engine.batch, "j1", T0)
    claim = await engine.batch.claim("j1", T0 + 3)
    assert (claim.job_id, claim.idx, claim.caller, claim.caller_class) == (
        "j1",
        0,
        "alice",
        "fleet",
    )
    assert json.loads(claim.options) == {"mode": "clean", "n": 0}
    job = await engine.batch.job("j1")
    assert (job.status, job.started_at, job.lease) == ("running", T0 + 3, T0 + 3)


async def test_claim_is_serial_no_target_while_one_is_running(engine):
    await _submit(engine.batch, "j1", T0, n=3)
    assert (await engine.batch.claim("j1", T0 + 1)).idx == 0
    assert await engine.batch.claim("j1", T0 + 2) is None
    await _finish(engine.batch, "j1", 0, T0 + 3)
    assert (await engine.batch.claim("j1", T0 + 4)).idx == 1


async def test_concurrent_claims_of_one_job_take_one_target(engine, request, tmp_path):
    from tests.contract.conftest import open_engine

    await _submit(engine.batch, "j1", T0, n=5)
    others = [await open_engine(engine.name, request, tmp_path) for _ in range(3)]
    try:
        got = await asyncio.gather(*[e.batch.claim("j1", T0 + 1) for e in [engine, *others] * 2])
    finally:
        for e in others:
            await e.close()
    assert [c.idx for c in got if c is not None] == [0]


async def test_workers_racing_on_one_job_fetch_each_target_once_in_order(engine, request, tmp_path):
    from tests.contract.conftest import open_engine

    await _submit(engine.batch, "j1", T0, n=30)
    others = [await open_engine(engine.name, request, tmp_path) for _ in range(3)]
    taken: list[int] = []

    async def drain(e):
        for _ in range(400):
            claim = await e.batch.claim("j1", T0 + 1)
            if claim is not None:
                taken.append(claim.idx)
                await _finish(e.batch, "j1", claim.idx, T0 + 1)
            elif (await e.batch.job("j1")).status == "done":
                return
            await asyncio.sleep(0)

    try:
        await asyncio.gather(*[drain(e) for e in [engine, *others]])
    finally:
        for e in others:
            await e.close()
    assert taken == list(range(30))


async def test_claim_respects_the_retry_time_and_never_skips_a_waiting_target(engine):
    await _submit(engine.batch, "j1", T0, n=3)
    await engine.batch.claim("j1", T0)
    assert await engine.batch.requeue("j1", 0, retry_at=T0 + 2, busy_since=T0, now=T0 + 0.5)
    assert await engine.batch.claim("j1", T0 + 1.5) is None
    again = await engine.batch.claim("j1", T0 + 2)
    assert (again.idx, again.busy_since) == (0, T0)


async def test_claim_takes_nothing_from_cancelled_or_finished_jobs(engine):
    await _submit(engine.batch, "c", T0)
    await engine.batch.cancel("c", T0)
    await _submit(engine.batch, "d", T0, n=1)
    await _run(engine.batch, "d", T0, ["ok"])
    assert await engine.batch.claim("c", T0 + 1) is None
    assert await engine.batch.claim("d", T0 + 1) is None
    assert await engine.batch.claim("missing", T0 + 1) is None


# -- finish ----------------------------------------------------------------------------------


async def test_finish_sets_done_failed_or_partial_once_the_last_target_is_stored(engine):
    for job_id, outcomes, terminal in (
        ("d", ["ok", "ok"], "done"),
        ("f", ["x", "x"], "failed"),
        ("p", ["ok", "x"], "partial"),
    ):
        await _submit(engine.batch, job_id, T0)
        await _run(engine.batch, job_id, T0 + 1, outcomes)
        assert (await engine.batch.job(job_id)).status == terminal
        assert await engine.counter(JOBS_TOTAL, terminal) == 1
    assert await engine.counter(TARGETS_TOTAL, "ok") == 3


async def test_finish_stores_only_a_running_target_and_counts_it_once(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0)
    first = await _finish(engine.batch, "j1", 0, T0 + 1)
    second = await _finish(engine.batch, "j1", 0, T0 + 2)
    assert (first.stored, first.terminal) == (True, "done")
    assert (second.stored, second.terminal) == (False, None)
    job = await engine.batch.job("j1")
    assert (job.targets_done, job.lease) == (1, T0 + 1)
    assert await engine.counter(JOBS_TOTAL, "done") == 1
    assert await engine.counter(TARGETS_TOTAL, "ok") == 1
    await _submit(engine.batch, "j2", T0, n=1)  # a target never claimed is not stored either
    assert not (await _finish(engine.batch, "j2", 0, T0 + 1)).stored
    assert (await engine.batch.job("j2")).targets_done == 0


async def test_finish_never_overwrites_cancelled(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0)
    await engine.batch.cancel("j1", T0 + 1)
    out = await _finish(engine.batch, "j1", 0, T0 + 2)
    assert (out.stored, out.terminal) == (True, None)
    assert (await engine.batch.job("j1")).status == "cancelled"


async def test_finish_adds_the_utf8_byte_length_of_its_result_and_observes_it(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0)
    await _finish(engine.batch, "j1", 0, T0, result="é" * 10)
    assert (await engine.batch.job("j1")).nbytes == 20
    bound = next(b for b in BYTES_BUCKETS if b >= 20)
    assert await engine.counter(RESULT_BYTES, f"bucket={bound}") == 1


async def test_finish_observes_job_and_target_seconds_and_result_bytes(engine):
    await _submit(engine.batch, "j1", T0, n=2)
    for now in (T0 + 10, T0 + 20):
        claim = await engine.batch.claim("j1", now)
        await engine.batch.finish(
            "j1", claim.idx, status="done", outcome="ok", seconds=0.25, now=now + 0.25,
            result="{}",
        )  # fmt: skip
    seconds = 20.25  # from the submit to the last store
    assert await engine.counter(JOB_SECONDS, "count") == 1
    assert await engine.counter(JOB_SECONDS, "sum") == seconds
    bound = next(b for b in SECONDS_BUCKETS if b >= seconds)
    assert await engine.counter(JOB_SECONDS, f"bucket={bound}") == 1
    assert await engine.counter(TARGET_SECONDS, "count") == 2
    assert await engine.counter(TARGET_SECONDS, "sum") == 0.5
    assert await engine.counter(TARGET_SECONDS, "bucket=0.25") == 2
    assert await engine.counter(RESULT_BYTES, "sum") == 4


async def test_finish_folds_an_unknown_outcome_to_other(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0)
    await engine.batch.finish(
        "j1", 0, status="failed", outcome="martian", seconds=1, now=T0, error="x"
    )
    assert await engine.counter(TARGETS_TOTAL, "other") == 1


async def test_finish_then_claim_takes_the_first_ready_job_in_the_same_transaction(engine):
    for j in ("a", "b", "c"):
        await _submit(engine.batch, j, T0)
    await engine.batch.claim("a", T0)
    await engine.batch.claim("b", T0)
    out = await engine.batch.finish(
        "a", 0, status="done", outcome="ok", seconds=1, now=T0 + 1, result="{}",
        then_claim=["b", "c", "a"],
    )  # fmt: skip
    assert (out.next.job_id, out.next.idx) == ("c", 0)


async def test_finish_with_a_byte_budget_evicts_whole_finished_jobs_oldest_lease_first(engine):
    for i, j in enumerate(("old", "mid", "live")):
        await _submit(engine.batch, j, T0 + i, n=1)
    await _run(engine.batch, "old", T0 + 1, ["ok"])
    await _run(engine.batch, "mid", T0 + 2, ["ok"])
    claim = await engine.batch.claim("live", T0 + 3)
    out = await _finish(engine.batch, "live", claim.idx, T0 + 3, result="x" * 100, max_bytes=102)
    assert out.evicted == 1
    assert await engine.batch.job("old") is None
    assert await engine.batch.job("mid") is not None


async def _finished_job(batch, job_id, now, nbytes, *, caller="alice", max_bytes=None):
    """A one-target job of `caller` whose result of `nbytes` is stored at `now`."""
    await _submit(batch, job_id, now, n=1, caller=caller)
    claim = await batch.claim(job_id, now)
    return await _finish(batch, job_id, claim.idx, now, result="x" * nbytes, max_bytes=max_bytes)


async def test_the_byte_budget_takes_the_storing_callers_own_finished_jobs_first(engine):
    await _finished_job(engine.batch, "bob-old", T0, 50, caller="bob")
    await _finished_job(engine.batch, "alice-old", T0 + 1, 50)
    out = await _finished_job(engine.batch, "alice-new", T0 + 2, 50, max_bytes=100)
    assert out.evicted == 1
    assert await engine.batch.job("alice-old") is None
    assert await engine.batch.job("bob-old") is not None  # older, but not the payer's


async def test_the_byte_budget_then_evicts_only_callers_over_an_equal_share(engine):
    await _finished_job(engine.batch, "carol-1", T0, 30, caller="carol")
    await _finished_job(engine.batch, "bob-1", T0 + 1, 60, caller="bob")
    await _finished_job(engine.batch, "bob-2", T0 + 2, 60, caller="bob")
    # 170 bytes, budget 120, three callers: a share is 40; carol holds 30, bob 120.
    out = await _finished_job(engine.batch, "alice-1", T0 + 3, 20, max_bytes=120)
    assert out.evicted == 1
    assert await engine.batch.job("bob-1") is None
    for kept in ("carol-1", "bob-2", "alice-1"):
        assert await engine.batch.job(kept) is not None, kept


async def test_the_byte_budget_never_evicts_a_live_job(engine):
    await _submit(engine.batch, "bob-live", T0, n=2, caller="bob")
    claim = await engine.batch.claim("bob-live", T0)
    await _finish(engine.batch, "bob-live", claim.idx, T0, result="x" * 200)
    out = await _finished_job(engine.batch, "alice-1", T0 + 1, 20, max_bytes=50)
    assert out.evicted == 0
    assert (await engine.batch.job("bob-live")).nbytes == 200


async def test_requeue_returns_a_running_target_to_pending_and_slides_the_lease(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0)
    assert await engine.batch.requeue("j1", 0, retry_at=T0 + 5, busy_since=T0, now=T0 + 1)
    assert not await engine.batch.requeue("j1", 0, retry_at=T0 + 5, busy_since=T0, now=T0 + 2)
    job, targets = await engine.batch.status("j1")
    assert (targets[0].status, targets[0].retry_at, job.lease) == ("pending", T0 + 5, T0 + 1)


async def test_a_target_put_back_without_busy_since_is_claimed_again_not_busy(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0)
    assert await engine.batch.requeue("j1", 0, retry_at=T0 + 2, busy_since=None, now=T0 + 1)
    assert await engine.batch.claim("j1", T0 + 1) is None  # not before its retry time
    again = await engine.batch.claim("j1", T0 + 2)
    assert (again.idx, again.busy_since) == (0, None)


# -- failed targets: retryable and retry_after (docs/API.md §Retryable failures) -------------


async def test_a_failed_target_keeps_retryable_and_retry_after(engine):
    await _submit(engine.batch, "j1", T0, n=3)
    await engine.batch.claim("j1", T0)
    await _finish(engine.batch, "j1", 0, T0, "failed", retryable=True, retry_after=T0 + 60)
    await engine.batch.claim("j1", T0)
    await _finish(engine.batch, "j1", 1, T0, "failed", retryable=True)
    await engine.batch.claim("j1", T0)
    await _finish(engine.batch, "j1", 2, T0, "failed")
    for results in (True, False):
        _, targets = await engine.batch.status("j1", results=results)
        assert [(bool(t.retryable), t.retry_after) for t in targets] == [
            (True, T0 + 60), (True, None), (False, None),
        ]  # fmt: skip


async def test_retry_after_is_kept_only_on_a_retryable_failure(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0)
    await _finish(engine.batch, "j1", 0, T0, "failed", retryable=False, retry_after=T0 + 60)
    _, targets = await engine.batch.status("j1")
    assert (bool(targets[0].retryable), targets[0].retry_after) == (False, None)


# -- cancel, reads, lease --------------------------------------------------------------------


async def test_cancel_flips_a_live_job_once_and_leaves_finished_jobs_alone(engine):
    await _submit(engine.batch, "j1", T0)
    before = await engine.batch.cancel("j1", T0 + 1)
    assert before.status == "queued"
    assert (await engine.batch.cancel("j1", T0 + 2)).status == "cancelled"
    assert await engine.batch.cancel("missing", T0) is None
    assert await engine.counter(JOBS_TOTAL, "cancelled") == 1
    assert (await engine.batch.job("j1")).lease == T0 + 1


async def test_touch_slides_the_lease_at_most_once_a_second(engine):
    job = (await _submit(engine.batch, "j1", T0)).job
    assert not await engine.batch.touch(job, T0 + 0.5)
    assert await engine.batch.touch(job, T0 + 1)
    assert (await engine.batch.job("j1")).lease == T0 + 1


async def test_status_without_results_keeps_status_error_and_hint(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0)
    await _finish(engine.batch, "j1", 0, T0, "failed", hint="retry")
    _, targets = await engine.batch.status("j1", results=False)
    assert (targets[0].status, targets[0].error, targets[0].hint) == ("failed", "boom", "retry")


async def test_live_jobs_are_in_submit_order_and_terminal_among_names_the_ended(engine):
    for j in ("c", "a", "b"):
        await _submit(engine.batch, j, T0)
    await engine.batch.cancel("a", T0)
    assert await engine.batch.live_jobs() == ["c", "b"]
    assert await engine.batch.terminal_among(["a", "b", "gone"]) == ["a", "gone"]


async def test_live_owners_name_each_live_jobs_caller_and_class_in_submit_order(engine):
    await _submit(engine.batch, "c", T0, caller="w/carol", caller_class="restricted")
    await _submit(engine.batch, "a", T0, caller="bob")
    await _submit(engine.batch, "b", T0)
    await engine.batch.cancel("a", T0)
    assert await engine.batch.live_owners() == [
        ("c", "w/carol", "restricted"),
        ("b", "alice", "fleet"),
    ]


async def test_gauges_count_live_jobs_and_running_targets(engine):
    await _submit(engine.batch, "a", T0)
    await _submit(engine.batch, "b", T0)
    await engine.batch.claim("a", T0)
    assert await engine.gauges() == (2, 1)


# -- the job list, retry links, fresh (docs/API.md §GET /v1/batch, §POST …/retry) --------------


async def test_a_retry_job_is_linked_both_ways(engine):
    await _submit(engine.batch, "old", T0)
    await _run(engine.batch, "old", T0 + 1, ["ok", "x"])
    out = await _submit(engine.batch, "new", T0 + 2, retry_of="old")
    assert out.kind == "created"
    _, _, retry_of, retries = await engine.batch.status_links("old")
    assert (retry_of, retries) == (None, ["new"])
    _, targets, retry_of, retries = await engine.batch.status_links("new", results=False)
    assert (retry_of, retries, len(targets)) == ("old", [], 2)
    assert await engine.batch.status_links("nope") is None


async def test_fresh_skips_the_reuse_of_an_ended_job(engine):
    await _submit(engine.batch, "first", T0, key="k")
    await _run(engine.batch, "first", T0 + 1, ["ok", "x"])
    assert (await _submit(engine.batch, "again", T0 + 2, key="k")).kind == "reused"
    out = await _submit(engine.batch, "fresh", T0 + 3, key="k", fresh=True)
    assert (out.kind, out.job.id) == ("created", "fresh")


async def test_fresh_makes_a_new_job_even_while_an_identical_job_is_live(engine):
    await _submit(engine.batch, "live", T0, key="k")
    out = await _submit(engine.batch, "fresh", T0 + 1, key="k", fresh=True)
    assert (out.kind, out.job.id) == ("created", "fresh")
    assert await engine.batch.live_jobs() == ["live", "fresh"]
    assert await engine.counter(JOBS_TOTAL, "created") == 2
    later = await _submit(engine.batch, "plain", T0 + 2, key="k")
    assert (later.kind, later.job.id) == ("reused", "fresh")  # the newest is the one reused


async def test_caller_busy_names_the_callers_oldest_live_job(engine):
    await _submit(engine.batch, "live1", T0, jobs_per_caller=2)
    await _submit(engine.batch, "live2", T0 + 1, jobs_per_caller=2)
    out = await _submit(engine.batch, "third", T0 + 2, jobs_per_caller=2)
    assert (out.kind, out.live_job) == ("caller_busy", "live1")


async def test_the_job_list_is_live_first_then_newest_first_and_pages_by_position(engine):
    for i in range(4):
        await _submit(engine.batch, f"j{i}", T0 + i)
    await _run(engine.batch, "j0", T0 + 10, ["ok", "x"])
    await _run(engine.batch, "j2", T0 + 10, ["x", "x"])
    await _submit(engine.batch, "bob1", T0 + 5, caller="bob")
    page = await engine.batch.list_jobs("alice", "fleet", now=T0 + 20, ttl=TTL, limit=3)
    assert [(j.id, j.ended) for j in page] == [("j3", 0), ("j1", 0), ("j2", 1)]
    assert (page[2].targets_done, page[2].targets_failed, page[2].lease) == (2, 2, T0 + 10)
    last = ListPosition(page[-1].ended, page[-1].created_at, page[-1].id)
    rest = await engine.batch.list_jobs("alice", "fleet", now=T0 + 20, ttl=TTL, limit=3, after=last)
    assert [j.id for j in rest] == ["j0"]
    gone = await engine.batch.list_jobs("alice", "fleet", now=T0 + 20 + TTL, ttl=TTL, limit=9)
    assert gone == []


# -- status pages (docs/API.md §GET /v1/batch/{job_id}) ---------------------------------------


async def test_a_status_page_holds_results_from_its_first_target_within_its_bytes(engine):
    from sift.store.records import ResultPage

    await _submit(engine.batch, "j1", T0, n=5)
    sizes = [100, 100, 500, 100, 100]
    for n in sizes:
        claim = await engine.batch.claim("j1", T0)
        await _finish(
            engine.batch, "j1", claim.idx, T0, result=json.dumps("é" * n, ensure_ascii=False)
        )

    async def page(first, max_bytes):
        got = await engine.batch.status_links("j1", page=ResultPage(first, max_bytes))
        return [t.idx for t in got[1] if t.result is not None]

    assert await page(0, 10_000) == [0, 1, 2, 3, 4]
    assert await page(0, 420) == [0, 1]  # bytes, not characters: 202 + 202, then 1002 over
    assert await page(2, 420) == [2]  # the first result always, whatever its size
    assert await page(3, 420) == [3, 4]
    got = await engine.batch.status_links("j1", results=False, page=ResultPage(0, 10))
    assert all(t.result is None for t in got[1])
