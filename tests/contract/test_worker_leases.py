"""Several workers on one PostgreSQL database (docs/WORKER.md §Several workers): each holds a
heartbeat lease, and only targets in flight on a worker whose lease expired are failed."""

from __future__ import annotations

import pytest

from sift.store.counters import JOBS_TOTAL, TARGETS_TOTAL
from sift.store.pg import counters as pg_counters
from sift.store.pg.batch import PgBatchStore
from sift.store.pg.batch_sql import LEASE_LOST
from sift.store.pg.db import PgDatabase
from sift.store.pg.workers import PgWorkerState
from tests.contract.test_batch_store import T0, _finish, _submit

LEASE = 15.0


@pytest.fixture
async def db(pg_dsn):
    d = PgDatabase(pg_dsn)
    yield d
    await d.close()


def _worker(db, name):
    return PgBatchStore(db, worker=name, lease=LEASE), PgWorkerState(db, name)


async def test_reap_fails_only_targets_in_flight_on_a_worker_whose_lease_expired(db):
    a, a_lease = _worker(db, "a")
    b, b_lease = _worker(db, "b")
    await _submit(a, "ja", T0, n=2)
    await _submit(a, "jb", T0, n=2)
    await a_lease.beat(1, T0, T0)
    await b_lease.beat(2, T0, T0)
    assert (await a.claim("ja", T0)).idx == 0
    assert (await b.claim("jb", T0)).idx == 0
    await b_lease.beat(2, T0, T0 + LEASE)  # b is alive; a has been silent for the lease
    assert await b.reap(T0 + LEASE) == 1
    _, ta = await b.status("ja")
    _, tb = await b.status("jb")
    assert (ta[0].status, ta[0].error) == ("failed", LEASE_LOST)
    assert tb[0].status == "running"  # never another live worker's
    assert (await b.claim("ja", T0 + LEASE)).idx == 1  # the job goes on with its next target


async def test_a_lease_not_yet_expired_keeps_its_targets(db):
    a, a_lease = _worker(db, "a")
    await _submit(a, "j", T0, n=1)
    await a_lease.beat(1, T0, T0)
    await a.claim("j", T0)
    assert await a.reap(T0 + LEASE - 0.1) == 0
    _, targets = await a.status("j")
    assert targets[0].status == "running"


async def test_a_reaped_last_target_sets_the_terminal_status_once_and_counts_restart(db):
    a, a_lease = _worker(db, "a")
    b, _ = _worker(db, "b")
    await _submit(a, "j", T0, n=1)
    await a_lease.beat(1, T0, T0)
    await a.claim("j", T0)
    assert await b.reap(T0 + 100) == 1
    assert await b.reap(T0 + 101) == 0
    assert (await b.job("j")).status == "failed"
    counters = await db.transaction(pg_counters.read_all)
    assert counters[(TARGETS_TOTAL, "restart")] == 1
    assert counters[(JOBS_TOTAL, "failed")] == 1


async def test_a_dead_workers_late_finish_is_not_stored_after_its_target_was_reaped(db):
    a, a_lease = _worker(db, "a")
    b, _ = _worker(db, "b")
    await _submit(a, "j", T0, n=2)
    await a_lease.beat(1, T0, T0)
    await a.claim("j", T0)
    await b.reap(T0 + 100)
    late = await _finish(a, "j", 0, T0 + 101)
    assert late.stored is False


async def test_a_worker_that_left_cleanly_has_its_unstored_targets_failed_at_once(db):
    a, a_lease = _worker(db, "a")
    b, _ = _worker(db, "b")
    await _submit(a, "j", T0, n=1)
    await a_lease.beat(1, T0, T0)
    await a.claim("j", T0)
    await a_lease.clear(1)
    assert await b.reap(T0 + 1) == 1


async def test_health_sees_the_newest_heartbeat_of_any_worker(db):
    _, a_lease = _worker(db, "a")
    _, b_lease = _worker(db, "b")
    assert await a_lease.get() is None
    await a_lease.beat(1, T0, T0 + 1)
    await b_lease.beat(2, T0, T0 + 5)
    assert (await a_lease.get()).heartbeat == T0 + 5
