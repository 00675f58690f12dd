"""The drain (docs/WORKER.md §Rotation and drain, §Store errors) on a real database file, with an
injected fetch.

The fake site decides each target's fate by the last segment of its URL: `ok…` answers,
`fail…` raises a TargetError, `busy…` raises Busy (or `busyN…` N times, then answers), `boom…`
raises an unexpected exception, `hold…` waits until the test releases it, `nap…` takes
`NAP` seconds (longer than a fair-share quantum).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter

import apsw
import pytest

from sift import config
from sift.auth import Caller
from sift.batch import cancel, submit
from sift.errors import Busy, Timeout
from sift.status import TERMINAL
from sift.store import Claim, open_store
from tests.dbview import view
from worker.drain import Runner

ALICE = Caller("alice")
BOB = Caller("bob")
CAROL = Caller("carol")
NAP = 0.7  # seconds: two fair-share quanta


class Site:
    """An injected FetchFn that records what it was asked, in order, and how much at once."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.starts: list[str] = []
        self.calls: Counter[str] = Counter()
        self.in_flight: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.total = 0
        self.peak_total = 0
        self.holds: dict[str, asyncio.Event] = {}
        self.started = asyncio.Event()
        self.first_start: float | None = None

    def release(self, name: str) -> None:
        self.holds.setdefault(name, asyncio.Event()).set()

    async def __call__(self, claim: Claim) -> dict:
        name = claim.url.rsplit("/", 1)[1]
        self.starts.append(name)
        self.calls[name] += 1
        self.first_start = self.first_start or time.monotonic()
        self.started.set()
        self.in_flight[claim.job_id] += 1
        self.total += 1
        self.peak[claim.job_id] = max(self.peak[claim.job_id], self.in_flight[claim.job_id])
        self.peak_total = max(self.peak_total, self.total)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if name.startswith("nap"):
                await asyncio.sleep(NAP)
            if name.startswith("hold"):
                await self.holds.setdefault(name, asyncio.Event()).wait()
            if name.startswith("fail"):
                raise Timeout("upstream timed out")
            if name.startswith("busy"):
                times = name[4:].split("-")[0]
                if not times.isdigit() or self.calls[name] <= int(times):
                    raise Busy()
            if name.startswith("boom"):
                raise RuntimeError(f"secret detail of {claim.url}")
            return {"success": True, "url": claim.url, "content": name * 20}
        finally:
            self.in_flight[claim.job_id] -= 1
            self.total -= 1


def make_cfg(state_dir, **batch):
    batch = {"jobs_per_caller": 8, "jobs_total": 8, "poll_interval": 0.5, **batch}
    return config.from_dict({"store": {"state_dir": str(state_dir)}, "batch": batch})


@pytest.fixture
def make_store(state_dir):
    opened = []

    def make(**batch):
        cfg = make_cfg(state_dir, **batch)
        store = open_store(cfg)
        opened.append(store)
        return cfg, store

    yield make
    for s in opened:
        s.close()


@contextlib.asynccontextmanager
async def running(store, cfg, fetch, *, grace: float = 5.0, gates=None):
    runner = Runner(store, cfg.batch, fetch, gates=gates)
    task = asyncio.create_task(runner.run())
    try:
        yield runner
    finally:
        await runner.shutdown(grace)
        await asyncio.wait_for(task, 10)


def targets(*names: str) -> list[dict]:
    return [{"url": f"http://127.0.0.1:9/{n}"} for n in names]


async def new_job(store, cfg, *names, caller=ALICE, runner=None) -> str:
    nudge = runner.nudge if runner else None
    sub = await submit(store, cfg.batch, caller, targets(*names), now=time.time(), nudge=nudge)
    return sub.job_id


async def until(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)


async def until_terminal(store, *job_ids, timeout: float = 10.0):
    await until(
        lambda: all(view(store).job(j).status in TERMINAL for j in job_ids),
        timeout,
    )


def logged(caplog) -> list[tuple[str, dict]]:
    """(message, structured fields) of every captured record."""
    return [(r.getMessage(), getattr(r, "fields", {})) for r in caplog.records]


def counters(store, name: str) -> dict[str, float]:
    return {label: v for (n, label), v in view(store).counters().items() if n == name}


# -- rule 2: rotation ----------------------------------------------------------------------


async def test_each_job_drains_serially_one_target_at_a_time(make_store):
    cfg, store = make_store(drain_tasks=2)
    site = Site(delay=0.01)
    job = await new_job(store, cfg, "ok0", "ok1", "ok2", "ok3")
    async with running(store, cfg, site):
        await until_terminal(store, job)
    assert site.starts == ["ok0", "ok1", "ok2", "ok3"]
    assert site.peak[job] == 1


async def test_two_jobs_with_one_task_alternate_a1_b1_a2_b2(make_store):
    cfg, store = make_store(drain_tasks=1)
    site = Site()
    a = await new_job(store, cfg, "a1", "a2", "a3")
    b = await new_job(store, cfg, "b1", "b2", "b3", caller=BOB)
    async with running(store, cfg, site):
        await until_terminal(store, a, b)
    assert site.starts == ["a1", "b1", "a2", "b2", "a3", "b3"]


async def test_two_jobs_with_two_tasks_drain_in_parallel_each_serially(make_store):
    cfg, store = make_store(drain_tasks=2)
    site = Site(delay=0.03)
    a = await new_job(store, cfg, "a1", "a2", "a3")
    b = await new_job(store, cfg, "b1", "b2", "b3", caller=BOB)
    async with running(store, cfg, site):
        await until_terminal(store, a, b)
    assert site.peak_total == 2
    assert site.peak[a] == site.peak[b] == 1
    assert [s for s in site.starts if s[0] == "a"] == ["a1", "a2", "a3"]


async def test_a_job_not_reached_yet_stays_queued(make_store):
    cfg, store = make_store(drain_tasks=1, hand_off_after=5.0)
    site = Site()
    a = await new_job(store, cfg, "hold-a", "ok-a")
    b = await new_job(store, cfg, "ok-b")
    async with running(store, cfg, site):
        await site.started.wait()
        await asyncio.sleep(0.05)
        assert view(store).job(a).status == "running"
        assert view(store).job(b).status == "queued"
        assert [t.status for t in view(store).targets(a)] == ["running", "pending"]
        site.release("hold-a")
        await until_terminal(store, a, b)


# -- fair shares and handing off (docs/WORKER.md §Fair shares between callers) ---------------


async def lane_filled(store, cfg, site, runner) -> str:
    """Carol's held target in the slow lane's only place (`slow_targets = 1`), so that every
    later target keeps the one drain task until it ends and the order of starts is the
    scheduler's alone (docs/WORKER.md §Handing off slow targets)."""
    job = await new_job(store, cfg, "hold-c", caller=CAROL, runner=runner)
    await until(lambda: "hold-c" in site.starts)
    return job


async def test_a_caller_that_used_the_drain_longer_waits_for_callers_that_used_it_less(
    make_store,
):
    cfg, store = make_store(drain_tasks=1, hand_off_after=5.0, slow_targets=1)
    site = Site()
    async with running(store, cfg, site) as runner:
        c = await lane_filled(store, cfg, site, runner)
        a = await new_job(store, cfg, "nap0", "nap1", "nap2", runner=runner)
        await until(lambda: "nap0" in site.starts)
        b = await new_job(store, cfg, "b0", "b1", "b2", "b3", caller=BOB, runner=runner)
        await until_terminal(store, a, b)
        site.release("hold-c")
        await until_terminal(store, c)
    # nap0 cost alice two quanta (0.7 s), bob's quick targets one each: bob goes twice for
    # each of alice's turns (docs/WORKER.md §Fair shares between callers)
    assert site.starts[1:7] == ["nap0", "b0", "b1", "nap1", "b2", "b3"]


async def test_callers_whose_targets_cost_the_same_quanta_alternate_exactly(make_store):
    cfg, store = make_store(drain_tasks=1, hand_off_after=5.0, slow_targets=1)
    site = Site(delay=0.02)
    async with running(store, cfg, site) as runner:
        c = await lane_filled(store, cfg, site, runner)
        a = await new_job(store, cfg, "a0", "a1", "a2")
        b = await new_job(store, cfg, "b0", "b1", "b2", caller=BOB, runner=runner)
        await until_terminal(store, a, b)
        site.release("hold-c")
        await until_terminal(store, c)
    assert site.starts[1:] == ["a0", "b0", "a1", "b1", "a2", "b2"]


async def test_a_target_still_running_after_hand_off_after_no_longer_holds_the_drain_task(
    make_store,
):
    cfg, store = make_store(drain_tasks=1, hand_off_after=0.05)
    site = Site()
    a = await new_job(store, cfg, "hold0", "ok1")
    b = await new_job(store, cfg, "b1", "b2", "b3", caller=BOB)
    async with running(store, cfg, site):
        await until_terminal(store, b)
        assert [t.status for t in view(store).targets(a)] == ["running", "pending"]
        site.release("hold0")
        await until_terminal(store, a)
    assert site.starts == ["hold0", "b1", "b2", "b3", "ok1"]
    assert site.peak[a] == 1
    assert view(store).job(a).status == "done"


async def test_a_callers_other_job_goes_on_while_its_handed_off_target_runs(make_store):
    """Work-conserving (docs/WORKER.md §The scheduler's guarantees, 1): a job held by its own
    caller's handed-off target never holds that caller's other ready jobs."""
    cfg, store = make_store(drain_tasks=1, hand_off_after=0.05)
    site = Site()
    a = await new_job(store, cfg, "hold0", "ok1")
    a2 = await new_job(store, cfg, "ok-a2", "ok-a3")
    async with running(store, cfg, site):
        await until_terminal(store, a2)
        assert [t.status for t in view(store).targets(a)] == ["running", "pending"]
        site.release("hold0")
        await until_terminal(store, a)
    assert site.starts == ["hold0", "ok-a2", "ok-a3", "ok1"]


async def test_a_target_yields_its_task_at_once_to_another_callers_ready_job(make_store):
    """docs/WORKER.md §Handing off slow targets: with `hand_off_after` far off, another
    caller's ready job does not wait behind a target on the only drain task while the slow
    lane has a place: the target moves there when it starts beside the job, when a handed-off
    target's end makes the job ready, and when the job is submitted."""
    cfg, store = make_store(drain_tasks=1, hand_off_after=60.0)
    site = Site()
    a = await new_job(store, cfg, "hold-a", "ok-a2")
    b = await new_job(store, cfg, "hold-b", caller=BOB)
    async with running(store, cfg, site) as runner:
        await until(lambda: site.starts == ["hold-a", "hold-b"], timeout=5)  # hold-a yielded
        site.release("hold-a")  # alice's job is ready again: hold-b yields
        await until_terminal(store, a, timeout=5)
        c = await new_job(store, cfg, "hold-c", caller=CAROL, runner=runner)
        await until(lambda: "hold-c" in site.starts, timeout=5)
        a3 = await new_job(store, cfg, "ok-a3", runner=runner)  # its submit: hold-c yields
        await until_terminal(store, a3, timeout=5)
        assert site.starts == ["hold-a", "hold-b", "ok-a2", "hold-c", "ok-a3"]
        assert len(runner.fetches.handed) == 2
        site.release("hold-b")
        site.release("hold-c")
        await until_terminal(store, b, c, timeout=5)


async def test_at_most_slow_targets_run_handed_off_the_rest_wait_on_their_task(make_store):
    cfg, store = make_store(drain_tasks=1, hand_off_after=0.05, slow_targets=1)
    site = Site()
    a = await new_job(store, cfg, "hold-a")
    b = await new_job(store, cfg, "hold-b", caller=BOB)
    c = await new_job(store, cfg, "ok-c", caller=CAROL)
    async with running(store, cfg, site):
        await until(lambda: "hold-b" in site.starts)
        await asyncio.sleep(0.2)
        assert "ok-c" not in site.starts  # hold-b keeps the only task: no room to hand it off
        site.release("hold-a")  # room again: hold-b is handed off and carol's job goes
        await until_terminal(store, a, c)
        assert view(store).targets(b)[0].status == "running"
        site.release("hold-b")
        await until_terminal(store, b)


async def test_shutdown_stores_a_handed_off_target_it_had_to_cancel(make_store):
    cfg, store = make_store(drain_tasks=1, hand_off_after=0.05)
    site = Site()
    job = await new_job(store, cfg, "hold0", "ok1")
    runner = Runner(store, cfg.batch, site)
    task = asyncio.create_task(runner.run())
    await until(lambda: runner.fetches.handed)
    await runner.shutdown(grace=0.1)
    await asyncio.wait_for(task, 5)
    rows = view(store).targets(job)
    assert (rows[0].status, rows[0].hint) == ("failed", "retry") and "shut down" in rows[0].error
    assert rows[1].status == "pending"


# -- rules 3 and 4: one target, terminal status ------------------------------------------


async def test_all_targets_done_makes_the_job_done_with_results_inline(make_store):
    cfg, store = make_store()
    job = await new_job(store, cfg, "ok0", "ok1")
    async with running(store, cfg, Site()):
        await until_terminal(store, job)
    got, rows = view(store).status(job)
    assert (got.status, got.targets_done, got.error) == ("done", 2, "")
    assert [r.status for r in rows] == ["done", "done"]
    assert '"content":"ok0ok0' in rows[0].result


async def test_a_mix_of_done_and_failed_targets_makes_the_job_partial(make_store):
    cfg, store = make_store()
    job = await new_job(store, cfg, "ok0", "fail1")
    async with running(store, cfg, Site()):
        await until_terminal(store, job)
    got, rows = view(store).status(job)
    assert got.status == "partial"
    assert (rows[1].status, rows[1].error, rows[1].hint) == (
        "failed",
        "upstream timed out",
        "retry",
    )


async def test_all_targets_failed_makes_the_job_failed(make_store):
    cfg, store = make_store()
    job = await new_job(store, cfg, "fail0", "fail1")
    async with running(store, cfg, Site()):
        await until_terminal(store, job)
    assert view(store).job(job).status == "failed"
    assert counters(store, "sift_batch_targets_total") == {"timeout": 2}


async def test_an_unexpected_exception_is_stored_as_internal_error_never_echoed(make_store, caplog):
    cfg, store = make_store()
    job = await new_job(store, cfg, "boom0")
    with caplog.at_level(logging.DEBUG):
        async with running(store, cfg, Site()):
            await until_terminal(store, job)
    row = view(store).targets(job)[0]
    assert (row.status, row.error, row.hint) == ("failed", "internal error", None)
    assert counters(store, "sift_batch_targets_total") == {"other": 1}
    lines = logged(caplog)
    assert (
        "batch target internal error",
        {"job_id": job, "idx": 0, "error_type": "RuntimeError"},
    ) in lines
    assert "secret" not in str(lines) and "127.0.0.1" not in str(lines)


async def test_terminal_status_and_job_metrics_are_counted_exactly_once(make_store):
    cfg, store = make_store(drain_tasks=2)
    jobs = [
        await new_job(store, cfg, "ok0", "ok1"),
        await new_job(store, cfg, "ok2", "fail3"),
        await new_job(store, cfg, "fail4"),
    ]
    async with running(store, cfg, Site()):
        await until_terminal(store, *jobs)
        await asyncio.sleep(0.1)  # further polls must not count anything again
    assert counters(store, "sift_batch_jobs_total") == {
        "created": 3,
        "done": 1,
        "partial": 1,
        "failed": 1,
    }
    assert counters(store, "sift_batch_targets_total") == {"ok": 3, "timeout": 2}
    assert counters(store, "sift_batch_job_seconds")["count"] == 3
    assert counters(store, "sift_batch_target_seconds")["count"] == 5
    assert [view(store).job(j).targets_done for j in jobs] == [2, 2, 1]


# -- busy --------------------------------------------------------------------------------------


async def test_a_busy_target_is_retried_while_the_task_goes_on_with_other_jobs(make_store):
    cfg, store = make_store(drain_tasks=1, retry_wait=0.05, retry_for=5.0)
    site = Site()
    a = await new_job(store, cfg, "busy2-a", "ok-a")
    b = await new_job(store, cfg, "ok-b1", "ok-b2", caller=BOB)
    async with running(store, cfg, site):
        await until_terminal(store, a, b)
    assert view(store).job(a).status == "done"
    # b drains while a waits; a stays serial: its next target only after the busy one is stored
    assert site.starts == ["busy2-a", "ok-b1", "ok-b2", "busy2-a", "busy2-a", "ok-a"]
    assert counters(store, "sift_batch_targets_total") == {"ok": 4}


async def test_a_target_busy_for_longer_than_retry_for_is_stored_failed(make_store):
    cfg, store = make_store(drain_tasks=1, retry_wait=0.05, retry_for=0.3)
    site = Site()
    job = await new_job(store, cfg, "busy-a")
    t0 = time.monotonic()
    async with running(store, cfg, site):
        await until_terminal(store, job)
    elapsed = time.monotonic() - t0
    row = view(store).targets(job)[0]
    assert (row.status, row.hint) == ("failed", "retry")
    assert row.error == Busy().msg
    assert view(store).job(job).status == "failed"
    assert counters(store, "sift_batch_targets_total") == {"busy": 1}
    assert site.calls["busy-a"] >= 3
    assert elapsed > cfg.batch.retry_for  # never failed before retry_for has passed


# -- rule 5: cancel ----------------------------------------------------------------------------


async def test_cancel_lets_the_target_in_flight_finish_and_starts_no_other(make_store):
    cfg, store = make_store(drain_tasks=1)
    site = Site()
    job = await new_job(store, cfg, "hold0", "ok1", "ok2")
    async with running(store, cfg, site) as runner:
        await site.started.wait()
        out = await cancel(store, job, ALICE, now=time.time(), nudge=runner.nudge)
        assert out.cancelled
        site.release("hold0")
        await until(lambda: view(store).targets(job)[0].status == "done")
        await asyncio.sleep(0.1)
    got, rows = view(store).status(job)
    assert got.status == "cancelled" and got.targets_done == 1
    assert [r.status for r in rows] == ["done", "pending", "pending"]
    assert site.starts == ["hold0"]
    jobs_total = counters(store, "sift_batch_jobs_total")
    assert jobs_total["cancelled"] == 1 and "done" not in jobs_total


# -- idempotency against the drain ------------------------------------------------------------


async def test_an_idempotent_resubmit_is_reused_and_not_drained_again(make_store):
    cfg, store = make_store()
    site = Site()
    async with running(store, cfg, site) as runner:
        job = await new_job(store, cfg, "ok0", runner=runner)
        await until_terminal(store, job)
        sub = await submit(
            store, cfg.batch, ALICE, targets("ok0"), now=time.time(), nudge=runner.nudge
        )
        assert sub.reused and sub.job_id == job and sub.status == "done"
        await asyncio.sleep(0.1)
    assert site.calls["ok0"] == 1


async def test_a_resubmit_after_a_restart_failed_job_is_a_new_job_and_drains(make_store):
    cfg, store = make_store()
    first = await new_job(store, cfg, "ok0")
    await store.batch.claim(first, time.time())  # started: a restart fails it
    assert await store.batch.restart(time.time()) == 1
    site = Site()
    async with running(store, cfg, site) as runner:
        again = await new_job(store, cfg, "ok0", runner=runner)
        await until_terminal(store, again)
    assert again != first and view(store).job(again).status == "done"
    assert view(store).job(first).error == "restart"
    assert site.calls["ok0"] == 1


# -- byte budget -------------------------------------------------------------------------------


async def test_the_byte_budget_evicts_finished_jobs_oldest_first_never_live_ones(make_store):
    cfg, store = make_store(max_bytes=800)
    site = Site()  # a result is about 50 bytes plus 20 times its name
    async with running(store, cfg, site) as runner:
        old = await new_job(store, cfg, "ok-" + "o" * 30, runner=runner)
        await until_terminal(store, old)
        assert view(store).batch_nbytes() < cfg.batch.max_bytes
        live = await new_job(store, cfg, "ok-n1", "hold-n2", runner=runner)
        await until(lambda: view(store).job(old) is None)
        assert view(store).job(live).status == "running"
        site.release("hold-n2")
        await until_terminal(store, live)
    assert view(store).job(live).status == "done"  # evicted only once no longer live


# -- rule 8: store errors ----------------------------------------------------------------------


async def test_a_store_error_is_logged_with_the_job_id_and_the_drain_goes_on(state_dir, caplog):
    cfg = config.from_dict(
        {"store": {"state_dir": str(state_dir), "busy_timeout": 0.05}, "batch": {}}
    )
    store = open_store(cfg)
    try:
        site = Site()
        job = await new_job(store, cfg, "hold0")
        blocker = apsw.Connection(str(cfg.db_path))
        blocker.setbusytimeout(2000)
        with caplog.at_level(logging.WARNING, logger="sift.worker"):
            async with running(store, cfg, site):
                await site.started.wait()
                blocker.cursor().execute("begin immediate")  # hold the write lock
                site.release("hold0")
                await until(lambda: "batch store error on finish" in caplog.text)
                blocker.cursor().execute("commit")
                await until_terminal(store, job)
        blocker.close()
        assert view(store).job(job).status == "done"
        warned = [f for m, f in logged(caplog) if m == "batch store error on finish"]
        assert warned and warned[0]["job_id"] == job and warned[0]["error_type"] == "StoreBusy"
        assert "127.0.0.1" not in str(logged(caplog))
    finally:
        store.close()


async def test_a_targets_outcome_is_retried_until_stored_however_long_the_lock(state_dir):
    cfg = config.from_dict(
        {"store": {"state_dir": str(state_dir), "busy_timeout": 0.05}, "batch": {}}
    )
    store = open_store(cfg)
    try:
        site = Site()
        job = await new_job(store, cfg, "hold0")
        blocker = apsw.Connection(str(cfg.db_path))
        async with running(store, cfg, site):
            await site.started.wait()
            blocker.cursor().execute("begin immediate")
            site.release("hold0")
            await asyncio.sleep(2.5)  # longer than a few backed-off attempts
            assert view(store).job(job).status == "running"
            blocker.cursor().execute("commit")
            await until_terminal(store, job)
        blocker.close()
        assert view(store).job(job).status == "done"
    finally:
        store.close()


# -- waking: nudge and poll ---------------------------------------------------------------------


async def test_a_nudge_wakes_the_worker_much_sooner_than_the_poll_interval(make_store):
    cfg, store = make_store(poll_interval=3.0)
    site = Site()
    async with running(store, cfg, site) as runner:
        await asyncio.sleep(0.1)  # the runner has found nothing and is waiting
        t0 = time.monotonic()
        await new_job(store, cfg, "ok0", runner=runner)
        await site.started.wait()
        latency = site.first_start - t0
    assert latency < cfg.batch.poll_interval / 10


async def test_polling_alone_picks_up_a_job_when_the_nudge_is_lost(make_store):
    cfg, store = make_store(poll_interval=0.2)
    site = Site()
    async with running(store, cfg, site):
        await asyncio.sleep(0.05)
        t0 = time.monotonic()
        job = await new_job(store, cfg, "ok0")  # no nudge
        await until_terminal(store, job)
        latency = site.first_start - t0
    assert latency < 3 * cfg.batch.poll_interval


async def test_a_new_job_joins_the_rotation_while_another_drains(make_store):
    cfg, store = make_store(drain_tasks=1)
    site = Site(delay=0.01)
    async with running(store, cfg, site) as runner:
        a = await new_job(store, cfg, *(f"a{i}" for i in range(8)), runner=runner)
        await until(lambda: "a1" in site.starts)
        b = await new_job(store, cfg, "b0", "b1", caller=BOB, runner=runner)
        await until_terminal(store, a, b)
    assert site.starts.index("b1") < site.starts.index("a7")


# -- rule 7: shutdown --------------------------------------------------------------------------


async def test_shutdown_lets_the_fetch_in_flight_finish_within_grace_and_takes_no_more(
    make_store,
):
    cfg, store = make_store(drain_tasks=1)
    site = Site(delay=0.1)
    job = await new_job(store, cfg, "ok0", "ok1")
    runner = Runner(store, cfg.batch, site)
    task = asyncio.create_task(runner.run())
    await site.started.wait()
    await runner.shutdown(grace=5)
    await asyncio.wait_for(task, 5)
    assert site.starts == ["ok0"]
    assert [t.status for t in view(store).targets(job)] == ["done", "pending"]


async def test_shutdown_cancels_a_fetch_that_outlasts_the_grace_period(make_store):
    cfg, store = make_store(drain_tasks=1)
    site = Site()
    job = await new_job(store, cfg, "hold0", "ok1")
    runner = Runner(store, cfg.batch, site)
    task = asyncio.create_task(runner.run())
    await site.started.wait()
    await runner.shutdown(grace=0.1)
    await asyncio.wait_for(task, 5)  # the held fetch never ends by itself
    row = view(store).targets(job)[0]
    assert (row.status, row.hint) == ("failed", "retry") and "shut down" in row.error
    assert counters(store, "sift_batch_targets_total") == {"cancel": 1}
    assert site.starts == ["hold0"]


# -- redaction ---------------------------------------------------------------------------------


async def test_batch_log_lines_carry_ids_counts_and_statuses_never_a_url(make_store, caplog):
    cfg, store = make_store(retry_wait=0.01, retry_for=0.05)
    restricted = Caller("carol", cls="restricted")
    with caplog.at_level(logging.DEBUG, logger="sift.worker"):
        async with running(store, cfg, Site()):
            a = await new_job(store, cfg, "ok0", "fail1", "busyx", "boom3")
            b = await new_job(store, cfg, "fail0", caller=restricted)
            await until_terminal(store, a, b)
    lines = logged(caplog)
    assert lines and "127.0.0.1" not in str(lines) and "http" not in str(lines)
    stored = [f for m, f in lines if m == "batch target stored"]
    assert {f["outcome"] for f in stored if f["job_id"] == a} == {"ok", "timeout", "busy", "other"}
    assert [f for f in stored if f["job_id"] == b] == [
        {"job_id": b, "idx": 0, "status": "failed"}  # no outcome for a restricted caller
    ]
