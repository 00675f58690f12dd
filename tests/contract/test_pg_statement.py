"""`PgDatabase.statement` runs one statement, so one snapshot (docs/ARCHITECTURE.md §The
store's surface): a second one is refused, and the status read with its retry links is one."""

from __future__ import annotations

import itertools

import psycopg
import pytest

from sift.store.pg.db import OneStatementOnly, PgDatabase, one, run_transaction
from sift.store.pg.events import PgEventLog
from tests.storekit import submit

T0 = 1_700_000_000.0


@pytest.fixture
async def db(pg_dsn):
    d = PgDatabase(pg_dsn)
    yield d
    await d.close()


async def test_statement_refuses_a_second_statement(db):
    async def two(c):
        await one(c, "select 1")
        await one(c, "select 2")

    with pytest.raises(OneStatementOnly):
        await db.statement(two)
    assert await db.statement(lambda c: one(c, "select 3")) == (3,)


async def test_status_with_retry_links_is_one_statement(db):
    from sift.store.pg.batch import PgBatchStore

    batch = PgBatchStore(db)
    await submit(batch, "old", T0)
    await submit(batch, "new", T0 + 1, retry_of="old")
    job, targets, retry_of, retries = await batch.status_links("old")
    assert (job.id, len(targets), retry_of, retries) == ("old", 2, None, ["new"])
    _, _, retry_of, retries = await batch.status_links("new", results=False)
    assert (retry_of, retries) == ("old", [])


class _Counted:
    """A real connection that counts the statements sent through it (each a round trip)."""

    def __init__(self, conn):
        self._conn = conn
        self.sql: list[str] = []

    async def execute(self, sql, args=()):
        self.sql.append(sql)
        return await self._conn.execute(sql, args)


async def test_a_stored_target_with_its_chained_claim_is_two_statements(db):
    """docs/WORKER.md §The store's transactions, statement budget: on PostgreSQL the target,
    its count, its event and its counters are one statement (held back on the job's last
    target and over the byte budget), the claim the other; BEGIN and COMMIT are the
    transaction's own."""
    from sift.store.pg import batch_sql
    from sift.store.pg.batch import PgBatchStore
    from sift.store.records import Fetched

    batch = PgBatchStore(db)
    await submit(batch, "a", T0, n=3)
    first = await batch.claim("a", T0)
    fetched = Fetched("done", "ok", 0.1, '{"content": "x"}', None, None, False, None)
    counted: list[_Counted] = []

    async def finish(conn):
        counted.append(_Counted(conn))
        return await batch_sql.finish(
            counted[0], "a", first.idx, fetched, T0 + 1, 10**9, ["a"], "w"
        )

    finished = await db.transaction(finish)
    assert finished.stored and finished.next.idx == 1
    assert len(counted[0].sql) == 2, counted[0].sql


async def _round_trips(db, fn, tmp_path) -> tuple[object, int]:
    """`fn`'s pipelined transaction and how many times the client waited for the server
    (a frontend message followed by a backend one, in libpq's own protocol trace)."""
    trace = tmp_path / "libpq.trace"
    got = None
    with open(trace, "w") as f:
        async with db.pool.connection() as conn:
            conn.pgconn.trace(f.fileno())
            try:
                got = await run_transaction(conn, fn, pipelined=True)
            finally:
                conn.pgconn.untrace()
    sides = [line.split("\t")[1] for line in trace.read_text().splitlines()]
    return got, sum(1 for pair in itertools.pairwise(sides) if pair == ("F", "B"))


async def test_a_stored_target_with_its_chained_claim_is_one_round_trip(db, tmp_path):
    """docs/WORKER.md §The store's transactions, statement budget: pipelined, with every
    answer read after COMMIT, BEGIN, both statements and COMMIT go together: one wait for the
    server (four before, seven unpipelined)."""
    from sift.store.pg import batch_sql
    from sift.store.pg.batch import PgBatchStore
    from sift.store.records import Fetched

    batch = PgBatchStore(db)
    await submit(batch, "a", T0, n=3)
    first = await batch.claim("a", T0)
    fetched = Fetched("done", "ok", 0.1, '{"content": "x"}', None, None, False, None)
    finished, trips = await _round_trips(
        db,
        lambda c: batch_sql.finish(c, "a", first.idx, fetched, T0 + 1, 10**9, ["a"], "w"),
        tmp_path,
    )
    assert finished.stored and finished.next.idx == 1
    assert trips == 1
    assert (await batch.status("a"))[1][0].status == "done"  # committed


async def test_a_claim_is_one_round_trip(db, tmp_path):
    """docs/WORKER.md §The store's transactions: a claim is one statement (the job's first
    claim appends `job.running` in it), so pipelined one wait for the server (three before)."""
    from sift.store.pg import batch_sql
    from sift.store.pg.batch import PgBatchStore

    batch = PgBatchStore(db)
    await submit(batch, "a", T0, n=2)
    claimed, trips = await _round_trips(
        db, lambda c: batch_sql.claim(c, "a", T0 + 1, "w"), tmp_path
    )
    assert claimed.idx == 0 and trips == 1
    job, targets = await batch.status("a")
    assert job.status == "running" and targets[0].status == "running"
    kinds = [e.kind for e in (await PgEventLog(db).read("a"))[1]]
    assert kinds == ["job.running"]
    again, trips = await _round_trips(db, lambda c: batch_sql.claim(c, "a", T0 + 2, "w"), tmp_path)
    assert again is None and trips == 1  # serial: its first target is in flight


async def test_the_last_target_is_held_back_and_stored_the_long_way(db, tmp_path):
    """docs/WORKER.md §The store's transactions: the job's last target ends the job in a
    second transaction (terminal status, its event after the target's, its counters), and a
    chained claim of another job made in the first one is kept."""
    from sift.store.pg import batch_sql
    from sift.store.pg.batch import PgBatchStore
    from sift.store.records import Fetched

    batch = PgBatchStore(db)
    await submit(batch, "a", T0, n=1)
    await submit(batch, "b", T0, n=2)
    first = await batch.claim("a", T0)
    fetched = Fetched("done", "ok", 0.1, '{"content": "x"}', None, None, False, None)
    finished, trips = await _round_trips(
        db,
        lambda c: batch_sql.finish(c, "a", first.idx, fetched, T0 + 1, 10**9, ["a", "b"], "w"),
        tmp_path,
    )
    assert finished.stored and finished.terminal == "done"
    assert (finished.next.job_id, finished.next.idx) == ("b", 0)
    # The quick transaction; then the target's read, the other job's claim (not the one that
    # has just ended), and COMMIT.
    assert trips == 4
    kinds = [e.kind for e in (await PgEventLog(db).read("a"))[1]]
    assert kinds == ["job.running", "target.done", "job.done"]
    assert (await batch.job("b")).status == "running"


async def test_a_store_held_back_commits_no_claim(db):
    """docs/WORKER.md §The store's transactions: when the quick store holds back (here the
    job's last target), its chained claim takes nothing, so if the second transaction then
    failed, no claimed target would be left that no one fetches."""
    from sift.store.pg import batch_sql
    from sift.store.pg.batch import PgBatchStore
    from sift.store.pg.db import Again, _pipelined
    from sift.store.records import Fetched

    batch = PgBatchStore(db)
    await submit(batch, "a", T0, n=1)
    await submit(batch, "b", T0, n=2)
    first = await batch.claim("a", T0)
    fetched = Fetched("done", "ok", 0.1, '{"content": "x"}', None, None, False, None)

    def finish(c):
        return batch_sql.finish(c, "a", first.idx, fetched, T0 + 1, 10**9, ["b"], "w")

    async with db.pool.connection() as conn:
        quick = await _pipelined(conn, finish)
        assert isinstance(await quick.read(), Again)  # the second transaction, not run
    job, targets = await batch.status("b")
    assert job.status == "queued" and {t.status for t in targets} == {"pending"}
    finished = await db.transaction(finish, pipelined=True)  # the whole, as a retry
    assert finished.terminal == "done" and (finished.next.job_id, finished.next.idx) == ("b", 0)


async def test_a_pipelined_transaction_that_fails_keeps_nothing(db):
    """A failure in the middle (a statement the server refuses, or the caller's own error)
    rolls back what the pipeline had already sent, and the connection goes back clean."""
    from sift.store.pg.batch import PgBatchStore

    batch = PgBatchStore(db)
    await submit(batch, "a", T0, n=1)

    async def server_refuses(c):
        await c.execute("update batch_job set lease = 1 where id = 'a'")
        await one(c, "select 1 / 0")

    async def caller_fails(c):
        await c.execute("update batch_job set lease = 2 where id = 'a'")
        raise ValueError("the caller's own error")

    with pytest.raises(psycopg.errors.DivisionByZero):
        await db.transaction(server_refuses, pipelined=True)
    with pytest.raises(ValueError):
        await db.transaction(caller_fails, pipelined=True)
    assert (await batch.job("a")).lease == T0
    assert await db.transaction(lambda c: one(c, "select 3"), pipelined=True) == (3,)
