"""Several workers on one PostgreSQL database (docs/WORKER.md §Several workers): each beats a
heartbeat timed by the database's clock, and only targets in flight on a worker silent for
`dead_after` are failed, whatever each box's own clock says."""

from __future__ import annotations

import time

import pytest

from sift.store.pg import counters as pg_counters
from sift.store.pg.batch import PgBatchStore
from sift.store.pg.batch_sql import WORKER_LOST
from sift.store.pg.db import PgDatabase
from sift.store.pg.workers import PgWorkerState
from sift.store.series import JOBS_TOTAL, TARGETS_TOTAL
from tests.contract.test_batch_store import _finish, _submit

DEAD_AFTER = 15.0


@pytest.fixture
async def db(pg_dsn):
    d = PgDatabase(pg_dsn)
    yield d
    await d.close()


def _worker(db, name):
    batch = PgBatchStore(db, worker=name, dead_after=DEAD_AFTER)
    return batch, PgWorkerState(db, name, dead_after=DEAD_AFTER)


async def _in_flight(batch, beat, job_id: str, now: float, n: int = 1) -> None:
    """A job of `n` targets whose first target is in flight on a worker that just beat."""
    await _submit(batch, job_id, now, n=n)
    await beat.beat(1, now, now)
    assert (await batch.claim(job_id, now)).idx == 0


async def _silence(db, name: str, seconds: float) -> None:
    """The worker's last beat was `seconds` ago by the database's clock (it stopped beating)."""
    await db.transaction(
        lambda c: c.execute(
            "update worker_beat set heartbeat = heartbeat - %s where id = %s", (seconds, name)
        )
    )


async def test_reap_fails_only_targets_in_flight_on_a_worker_silent_for_dead_after(db):
    now = time.time()
    a, a_beat = _worker(db, "a")
    b, b_beat = _worker(db, "b")
    await _submit(a, "ja", now, n=2)
    await _submit(a, "jb", now, n=2)
    await a_beat.beat(1, now, now)
    await b_beat.beat(2, now, now)
    assert (await a.claim("ja", now)).idx == 0
    assert (await b.claim("jb", now)).idx == 0
    await _silence(db, "a", DEAD_AFTER)  # b is alive; a has been silent for dead_after
    assert await b.reap(now) == 1
    _, ta = await b.status("ja")
    _, tb = await b.status("jb")
    assert (ta[0].status, ta[0].error) == ("failed", WORKER_LOST)
    assert (ta[0].retryable, ta[0].retry_after) == (True, None)  # the worker stopped, not the site
    assert tb[0].status == "running"  # never another live worker's
    assert (await b.claim("ja", now)).idx == 1  # the job goes on with its next target


async def test_a_worker_whose_clock_runs_ahead_never_fails_a_healthy_workers_target(db):
    now = time.time()
    a, a_beat = _worker(db, "a")
    ahead, ahead_beat = _worker(db, "ahead")
    await _in_flight(a, a_beat, "j", now, n=1)
    skewed = now + 20  # this box's clock is 20 s ahead of the others'
    await ahead_beat.beat(2, skewed, skewed)
    assert await ahead.restart(skewed) == 0
    assert await ahead.reap(skewed + 1) == 0
    _, targets = await a.status("j")
    assert targets[0].status == "running"
    assert (await _finish(a, "j", 0, now + 1)).stored


async def test_a_worker_silent_for_less_than_dead_after_keeps_its_targets(db):
    now = time.time()
    a, a_beat = _worker(db, "a")
    await _in_flight(a, a_beat, "j", now, n=1)
    await _silence(db, "a", DEAD_AFTER - 1)
    assert await a.reap(now + DEAD_AFTER * 10) == 0  # the caller's clock decides nothing
    _, targets = await a.status("j")
    assert targets[0].status == "running"


async def test_a_reaped_last_target_sets_the_terminal_status_once_and_counts_restart(db):
    now = time.time()
    a, a_beat = _worker(db, "a")
    b, _ = _worker(db, "b")
    await _in_flight(a, a_beat, "j", now, n=1)
    await _silence(db, "a", 100)
    assert await b.reap(now) == 1
    assert await b.reap(now + 1) == 0
    assert (await b.job("j")).status == "failed"
    counters = await db.transaction(pg_counters.read_all)
    assert counters[(TARGETS_TOTAL, "restart")] == 1
    assert counters[(JOBS_TOTAL, "failed")] == 1


async def test_a_dead_workers_late_finish_is_not_stored_after_its_target_was_reaped(db):
    now = time.time()
    a, a_beat = _worker(db, "a")
    b, _ = _worker(db, "b")
    await _in_flight(a, a_beat, "j", now, n=2)
    await _silence(db, "a", 100)
    await b.reap(now)
    late = await _finish(a, "j", 0, now + 1)
    assert late.stored is False


async def test_a_worker_that_left_cleanly_has_its_unstored_targets_failed_at_once(db):
    now = time.time()
    a, a_beat = _worker(db, "a")
    b, _ = _worker(db, "b")
    await _in_flight(a, a_beat, "j", now, n=1)
    await a_beat.clear(1)
    assert await b.reap(now) == 1


async def test_health_sees_the_newest_heartbeat_told_on_the_readers_clock(db):
    now = time.time()
    _, a_beat = _worker(db, "a")
    _, b_beat = _worker(db, "b")
    assert await a_beat.get(now) is None
    await a_beat.beat(1, now, now)
    await b_beat.beat(2, now, now)
    await _silence(db, "a", 7)
    await _silence(db, "b", 3)
    seen = await a_beat.get(1000.0)  # a reader whose clock says 1000
    assert seen.pid == 2
    assert 996.0 < seen.heartbeat <= 997.0  # about 3 s before its own now
