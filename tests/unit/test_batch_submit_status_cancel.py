"""Submit, status, cancel and touch (docs/WORKER.md §Submit, status, cancel) on a real database
file."""

from __future__ import annotations

import asyncio
import hashlib

import orjson
import pytest

from sift import config
from sift.auth import Caller
from sift.batch import cancel, idem_key, read_status, submit, touch
from sift.errors import (
    BadRequest,
    Conflict,
    InvalidTarget,
    NotFound,
    Refused,
    TooManyRequests,
    Unprocessable,
)
from sift.fetch.target import Target, parse_target
from sift.store import batch_sql, open_store
from tests.dbview import view
from tests.finish import finish_all

ALICE = Caller("alice")
BOB = Caller("bob")
T0 = 1_700_000_000.0


def make_cfg(state_dir, **batch):
    return config.from_dict({"store": {"state_dir": str(state_dir)}, "batch": batch})


@pytest.fixture
def cfg(state_dir):
    return make_cfg(state_dir, jobs_per_caller=2, jobs_total=3, targets_per_job=4)


@pytest.fixture
def store(cfg):
    s = open_store(cfg)
    yield s
    s.close()


def urls(*names):
    return [{"url": f"http://127.0.0.1:9/{n}"} for n in names]


def refuse_port_9(url: str) -> None:
    if ":9/" in url:
        raise Refused("port 9 is not allowed")


async def test_empty_target_list_is_a_bad_request(store, cfg):
    with pytest.raises(BadRequest, match="no targets"):
        await submit(store, cfg.batch, ALICE, [], now=T0)
    assert await store.batch.live_jobs() == []


async def test_targets_that_are_not_a_list_are_a_bad_request(store, cfg):
    with pytest.raises(BadRequest, match="list"):
        await submit(store, cfg.batch, ALICE, {"url": "http://127.0.0.1:9/"}, now=T0)


async def test_an_invalid_target_is_400_naming_its_idx(store, cfg):
    raw = [*urls("a", "b"), {"url": "http://127.0.0.1:9/c", "mode": "nope"}]
    with pytest.raises(InvalidTarget) as e:
        await submit(store, cfg.batch, ALICE, raw, now=T0)
    assert e.value.status == 400
    body = e.value.envelope()
    assert body["idx"] == 2 and body["error"].startswith("target 2: ") and not body["success"]
    assert await store.batch.live_jobs() == []


async def test_a_target_refused_by_the_precheck_is_422_naming_its_idx(store, cfg):
    raw = [{"url": "http://127.0.0.1/ok"}, {"url": "http://127.0.0.1/ok2"}, *urls("x")]
    with pytest.raises(Refused) as e:
        await submit(store, cfg.batch, ALICE, raw, now=T0, precheck=refuse_port_9)
    assert e.value.status == 422
    assert e.value.envelope() == {
        "success": False,
        "error": "target 2: port 9 is not allowed",
        "retryable": False,
        "retry_after": None,
        "idx": 2,
    }
    assert await store.batch.live_jobs() == []


async def test_submit_stores_the_job_queued_with_its_targets_pending_in_order(store, cfg):
    raw = [*urls("a"), {"url": "http://127.0.0.1:9/b", "mode": "text", "grep": "x"}]
    sub = await submit(store, cfg.batch, ALICE, raw, now=T0)
    assert sub.body() == {
        "success": True,
        "job_id": sub.job_id,
        "status": "queued",
        "targets": 2,
        "reused": False,
    }
    assert len(sub.job_id) == 32 and int(sub.job_id, 16) >= 0
    job, targets = view(store).status(sub.job_id)
    assert (job.status, job.caller, job.caller_class) == ("queued", "alice", "fleet")
    assert job.created_at == job.lease == T0
    assert [(t.idx, t.url, t.status) for t in targets] == [
        (0, "http://127.0.0.1:9/a", "pending"),
        (1, "http://127.0.0.1:9/b", "pending"),
    ]
    assert orjson.loads(targets[1].options) == {"mode": "text", "grep": "x"}


def test_idem_key_is_the_sha256_of_the_callers_identity_nul_and_canonical_target_json():
    targets = [parse_target({"url": "http://127.0.0.1:9/a", "mode": "text"})]
    canonical = orjson.dumps([{"mode": "text", "url": "http://127.0.0.1:9/a"}])
    who = b"fleet\x00default\x00alice"
    assert idem_key(ALICE, targets) == hashlib.sha256(who + b"\x00" + canonical).hexdigest()


def test_idem_key_ignores_key_order_and_default_options_but_not_list_order():
    a = [parse_target({"url": "http://127.0.0.1:9/a", "mode": "clean", "recover": False})]
    b = [parse_target({"recover": False, "url": "http://127.0.0.1:9/a"})]
    assert idem_key(ALICE, a) == idem_key(ALICE, b)
    two = [parse_target(u) for u in urls("a", "b")]
    assert idem_key(ALICE, two) != idem_key(ALICE, two[::-1])
    assert idem_key(ALICE, two) != idem_key(Caller("bob"), two)
    assert idem_key(ALICE, two) != idem_key(Caller("alice", "other"), two)
    assert idem_key(ALICE, two) != idem_key(Caller("alice", cls="restricted"), two)


async def test_resubmitting_the_same_list_reuses_the_job(store, cfg):
    first = await submit(store, cfg.batch, ALICE, urls("a", "b"), now=T0)
    again = await submit(store, cfg.batch, ALICE, urls("a", "b"), now=T0 + 5)
    assert again.reused and again.job_id == first.job_id and again.status == "queued"
    assert await store.batch.live_jobs() == [first.job_id]
    counts = view(store).counters()
    assert counts[("sift_batch_jobs_total", "created")] == 1
    assert counts[("sift_batch_jobs_total", "reused")] == 1


async def test_reuse_is_decided_before_the_caps(store, cfg):
    first = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    await submit(store, cfg.batch, ALICE, urls("b"), now=T0)  # alice now at her cap of 2
    again = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    assert again.reused and again.job_id == first.job_id


async def test_another_caller_with_the_same_list_gets_a_new_job(store, cfg):
    a = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    b = await submit(store, cfg.batch, BOB, urls("a"), now=T0)
    assert not b.reused and b.job_id != a.job_id


async def test_a_cancelled_job_is_not_reused(store, cfg):
    first = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    await cancel(store, first.job_id, ALICE, now=T0 + 1)
    again = await submit(store, cfg.batch, ALICE, urls("a"), now=T0 + 2)
    assert not again.reused and again.job_id != first.job_id


async def test_a_failed_job_is_not_reused(store, cfg):
    first = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    await store.batch.claim(first.job_id, T0)
    await store.batch.restart(T0 + 1)
    again = await submit(store, cfg.batch, ALICE, urls("a"), now=T0 + 2)
    assert not again.reused and again.job_id != first.job_id


async def test_a_job_whose_lease_expired_is_not_reused(store, cfg):
    first = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    later = T0 + cfg.batch.ttl + 1
    again = await submit(store, cfg.batch, ALICE, urls("a"), now=later)
    assert not again.reused and again.job_id != first.job_id


async def test_more_targets_than_the_job_cap_is_422_too_many_targets(store, cfg):
    with pytest.raises(Unprocessable, match="too many targets") as e:
        await submit(store, cfg.batch, ALICE, urls(*"abcde"), now=T0)
    assert e.value.status == 422
    assert await store.batch.live_jobs() == []


async def test_a_caller_at_its_live_job_cap_is_429_caller_busy(store, cfg):
    await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    await submit(store, cfg.batch, ALICE, urls("b"), now=T0)
    with pytest.raises(TooManyRequests, match="caller busy") as e:
        await submit(store, cfg.batch, ALICE, urls("c"), now=T0)
    assert e.value.status == 429 and e.value.hint == "retry"


async def test_live_jobs_at_the_total_cap_is_429_jobs_busy(store, cfg):
    await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    await submit(store, cfg.batch, ALICE, urls("b"), now=T0)
    await submit(store, cfg.batch, BOB, urls("c"), now=T0)
    with pytest.raises(TooManyRequests, match="jobs busy") as e:
        await submit(store, cfg.batch, BOB, urls("d"), now=T0)
    assert e.value.status == 429


async def test_concurrent_submits_can_neither_exceed_a_cap_nor_double_a_job(cfg):
    stores = [open_store(cfg) for _ in range(4)]
    try:
        distinct = await asyncio.gather(
            *(submit(s, cfg.batch, ALICE, urls(str(i)), now=T0) for i, s in enumerate(stores)),
            return_exceptions=True,
        )
        created = [r for r in distinct if not isinstance(r, Exception)]
        assert len(created) == cfg.batch.jobs_per_caller
        assert all(isinstance(r, TooManyRequests) for r in distinct if isinstance(r, Exception))
        same = await asyncio.gather(*(submit(s, cfg.batch, BOB, urls("x"), now=T0) for s in stores))
        assert len({r.job_id for r in same}) == 1
        assert sorted(r.reused for r in same) == [False, True, True, True]
    finally:
        for s in stores:
            s.close()


async def test_the_nudge_goes_out_after_commit_and_only_for_a_new_job(store, cfg):
    seen = []

    def nudge():
        # The job must already be visible to the worker.
        seen.append(view(store).read(batch_sql.live_jobs))

    sub = await submit(store, cfg.batch, ALICE, urls("a"), now=T0, nudge=nudge)
    assert seen == [[sub.job_id]]
    await submit(store, cfg.batch, ALICE, urls("a"), now=T0, nudge=nudge)  # reused
    assert len(seen) == 1
    other = await submit(store, cfg.batch, ALICE, urls("b"), now=T0, nudge=nudge)
    with pytest.raises(TooManyRequests):
        await submit(store, cfg.batch, ALICE, urls("c"), now=T0, nudge=nudge)
    assert seen == [[sub.job_id], [sub.job_id, other.job_id]]


async def test_submit_sweeps_expired_jobs(store, cfg):
    old = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    await store.batch.cancel(old.job_id, T0)
    await submit(store, cfg.batch, ALICE, urls("b"), now=T0 + cfg.batch.ttl)
    assert view(store).job(old.job_id) is None


# -- status ------------------------------------------------------------------------------------


async def test_status_body_has_the_wire_shape_of_each_target_status(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a", "b", "c", "d"), now=T0)
    await finish_all(store, sub.job_id, T0 + 1, ["ok", "timeout"])
    await store.batch.claim(sub.job_id, T0 + 2)
    view = await read_status(store, sub.job_id, ALICE)
    body = orjson.loads(view.json())
    assert body == {
        "job_id": sub.job_id,
        "status": "running",
        "error": "",
        "targets_total": 4,
        "targets_done": 2,
        "targets_failed": 1,
        "created_at": "2023-11-14T22:13:20Z",
        "retry_of": None,
        "retries": [],
        "targets": [
            {
                "idx": 0,
                "url": "http://127.0.0.1:9/a",
                "status": "done",
                "result": {"success": True, "url": "http://127.0.0.1:9/a", "content": "x" * 10},
            },
            {
                "idx": 1,
                "url": "http://127.0.0.1:9/b",
                "status": "failed",
                "error": "upstream timed out",
                "hint": "retry",
                "retryable": True,
                "retry_after": None,
            },
            {"idx": 2, "url": "http://127.0.0.1:9/c", "status": "running"},
            {"idx": 3, "url": "http://127.0.0.1:9/d", "status": "pending"},
        ],
        "next_cursor": None,
    }
    assert not view.terminal


async def test_results_false_leaves_out_the_result_objects_only(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a", "b"), now=T0)
    await finish_all(store, sub.job_id, T0 + 1, ["ok", "timeout"])
    body = orjson.loads((await read_status(store, sub.job_id, ALICE, results=False)).json())
    assert body["status"] == "partial"
    assert body["targets"][0] == {"idx": 0, "url": "http://127.0.0.1:9/a", "status": "done"}
    assert body["targets"][1]["error"] == "upstream timed out"


async def test_a_stored_result_is_embedded_verbatim(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    claim = await store.batch.claim(sub.job_id, T0)
    text = '{"success":true,"content":"' + "é\\n" * 50_000 + '","n":1.50}'
    await store.batch.finish(
        sub.job_id, claim.idx, status="done", outcome="ok", seconds=0, now=T0, result=text
    )
    raw = (await read_status(store, sub.job_id, ALICE)).json()
    assert text.encode() in raw  # not re-serialized: 1.50 stays 1.50


async def test_a_status_read_writes_nothing_and_touch_slides_the_lease(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    job = (await read_status(store, sub.job_id, ALICE)).job
    assert view(store).job(sub.job_id).lease == T0
    assert await touch(store, job, T0 + 60)
    assert view(store).job(sub.job_id).lease == T0 + 60
    assert not await touch(store, job._replace(id="0" * 32), T0 + 60)


async def test_touch_slides_the_lease_at_most_once_a_second(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    job = (await read_status(store, sub.job_id, ALICE)).job
    assert not await touch(store, job, T0 + 0.5)
    assert view(store).job(sub.job_id).lease == T0
    assert await touch(store, job, T0 + 1.0)


async def test_another_callers_job_reads_exactly_like_an_unknown_one(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    assert await read_status(store, sub.job_id, BOB) is None
    assert await read_status(store, "f" * 32, ALICE) is None
    restricted_alice = Caller("alice", cls="restricted")
    assert await read_status(store, sub.job_id, restricted_alice) is None


# -- cancel ------------------------------------------------------------------------------------


async def test_cancel_flips_a_live_job_at_once_and_nudges(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a", "b"), now=T0)
    nudges = []
    out = await cancel(store, sub.job_id, ALICE, now=T0 + 1, nudge=lambda: nudges.append(1))
    assert (out.cancelled, out.prior) == (True, "queued")
    assert out.body() == {"success": True, "status": "cancelled"}
    assert view(store).job(sub.job_id).status == "cancelled" and nudges == [1]
    assert view(store).counters()[("sift_batch_jobs_total", "cancelled")] == 1


async def test_cancelling_a_cancelled_job_answers_200_again_and_counts_once(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    await cancel(store, sub.job_id, ALICE, now=T0)
    again = await cancel(store, sub.job_id, ALICE, now=T0)
    assert (again.cancelled, again.prior) == (False, "cancelled")
    assert again.body() == {"success": True, "status": "cancelled"}
    assert view(store).counters()[("sift_batch_jobs_total", "cancelled")] == 1


async def test_cancelling_a_finished_job_is_409_with_its_status(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    await finish_all(store, sub.job_id, T0, ["ok"])
    out = await cancel(store, sub.job_id, ALICE, now=T0)
    assert (out.cancelled, out.prior) == (False, "done")
    with pytest.raises(Conflict) as e:
        out.body()
    assert e.value.status == 409 and e.value.envelope()["status"] == "done"
    assert view(store).job(sub.job_id).status == "done"


async def test_cancelling_an_unknown_or_foreign_job_is_404(store, cfg):
    sub = await submit(store, cfg.batch, ALICE, urls("a"), now=T0)
    for out in (
        await cancel(store, sub.job_id, BOB, now=T0),
        await cancel(store, "e" * 32, ALICE, now=T0),
    ):
        assert (out.cancelled, out.prior) == (False, None)
        with pytest.raises(NotFound):
            out.body()
    assert view(store).job(sub.job_id).status == "queued"


def test_links_and_images_options_round_trip_through_the_stored_target():
    target = parse_target({"url": "http://127.0.0.1:9/a", "links": False, "images": False})
    assert target.options() == {"links": False, "images": False}
    stored = Target.from_stored(target.url, target.options_json())
    assert stored == target and not stored.links and not stored.images
    default = parse_target({"url": "http://127.0.0.1:9/a", "links": True, "images": None})
    assert default.options() == {} and default.links and default.images
