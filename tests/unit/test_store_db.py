"""The database file: migrations, pragmas, the write helper and its lock behaviour."""

from __future__ import annotations

import asyncio
import logging
import threading

import apsw
import pytest

from sift.errors import Unavailable
from sift.store import Heartbeat, Store, StoreBusy
from sift.store.db import Database
from sift.store.schema import MIGRATIONS


@pytest.fixture
def db(tmp_path):
    d = Database(tmp_path / "sift.db")
    yield d
    d.close()


def _count_jobs(db: Database) -> int:
    return db.read(lambda c: c.execute("select count(*) from batch_job").fetchone()[0])


def _insert_job(c: apsw.Cursor, job_id: str) -> None:
    c.execute(
        "insert into batch_job(id, caller, caller_class, idem_key, status, targets_total, "
        "created_at, lease) values (?, 'a', 'fleet', 'k', 'queued', 1, 1.0, 1.0)",
        (job_id,),
    )


def test_schema_version_equals_number_of_migrations(db):
    version = db.read(lambda c: c.execute("pragma user_version").fetchone()[0])
    assert version == len(MIGRATIONS)


def test_reopening_does_not_rerun_migrations(tmp_path, caplog):
    path = tmp_path / "sift.db"
    with caplog.at_level(logging.INFO, logger="sift.store"):
        first = Database(path)
        first.write(lambda c: _insert_job(c, "j1"))
        first.close()
        migrated_first = [r for r in caplog.records if "migrated" in r.getMessage()]
        caplog.clear()
        second = Database(path)
    try:
        assert len(migrated_first) == 1  # one line for the run (docs/OPERATIONS.md §Upgrades)
        assert [r for r in caplog.records if "migrated" in r.getMessage()] == []
        assert _count_jobs(second) == 1
        version = second.read(lambda c: c.execute("pragma user_version").fetchone()[0])
        assert version == len(MIGRATIONS)
    finally:
        second.close()


def test_both_connections_use_wal_synchronous_normal_and_foreign_keys(db):
    for conn in (db.reader, db.writer):
        cur = conn.cursor()
        assert cur.execute("pragma journal_mode").fetchone()[0] == "wal"
        assert cur.execute("pragma synchronous").fetchone()[0] == 1  # NORMAL
        assert cur.execute("pragma foreign_keys").fetchone()[0] == 1


def test_write_that_raises_is_rolled_back_completely(db):
    db.write(lambda c: _insert_job(c, "kept"))

    def half_done(c):
        _insert_job(c, "a")
        _insert_job(c, "b")
        c.execute("update batch_job set status = 'running' where id = 'kept'")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        db.write(half_done)
    rows = db.read(lambda c: c.execute("select id, status from batch_job").fetchall())
    assert rows == [("kept", "queued")]
    # The connection is usable again: no transaction was left open.
    assert db.writer.in_transaction is False
    db.write(lambda c: _insert_job(c, "after"))
    assert _count_jobs(db) == 2


def test_write_waits_for_another_connections_immediate_lock_then_succeeds(tmp_path):
    path = tmp_path / "sift.db"
    db = Database(path, busy_timeout=10.0)
    other = apsw.Connection(str(path))
    other.cursor().execute("begin immediate")
    started = threading.Event()
    finished = threading.Event()
    errors: list[BaseException] = []

    def writer():
        started.set()
        try:
            db.write(lambda c: _insert_job(c, "waited"))
        except BaseException as e:
            errors.append(e)
        finished.set()

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert started.wait(5)
        # While the other connection holds the lock, the write is still waiting.
        assert not finished.wait(0.3)
        other.cursor().execute("commit")
        assert finished.wait(5)
    finally:
        if other.in_transaction:
            other.cursor().execute("rollback")
        t.join(5)
        other.close()
    try:
        assert errors == []
        assert _count_jobs(db) == 1
    finally:
        db.close()


def test_write_with_tiny_busy_timeout_raises_store_busy_503(tmp_path):
    path = tmp_path / "sift.db"
    db = Database(path, busy_timeout=0.01)
    other = apsw.Connection(str(path))
    other.cursor().execute("begin immediate")
    try:
        with pytest.raises(StoreBusy) as exc:
            db.write(lambda c: _insert_job(c, "never"))
        assert isinstance(exc.value, Unavailable)
        assert exc.value.status == 503
    finally:
        other.cursor().execute("rollback")
        other.close()
    # Nothing was half-written, and the write helper works again once the lock is free.
    assert _count_jobs(db) == 0
    db.write(lambda c: _insert_job(c, "later"))
    assert _count_jobs(db) == 1
    db.close()


def test_read_is_one_snapshot_even_while_another_process_commits(tmp_path):
    path = tmp_path / "sift.db"
    db = Database(path)
    other = Database(path)
    db.write(lambda c: _insert_job(c, "first"))

    def read_twice(c):
        before = c.execute("select count(*) from batch_job").fetchone()[0]
        other.write(lambda w: _insert_job(w, "second"))
        after = c.execute("select count(*) from batch_job").fetchone()[0]
        return before, after

    try:
        assert db.read(read_twice) == (1, 1)
        assert _count_jobs(db) == 2
    finally:
        db.close()
        other.close()


def _open_together(path, n: int) -> tuple[list[Database], list[BaseException]]:
    """`n` threads, each with its own connections, open the same file at the same instant."""
    barrier = threading.Barrier(n)
    lock = threading.Lock()
    opened: list[Database] = []
    errors: list[BaseException] = []

    def opener():
        barrier.wait()
        try:
            d = Database(path)
        except BaseException as e:
            with lock:
                errors.append(e)
        else:
            with lock:
                opened.append(d)

    threads = [threading.Thread(target=opener) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return opened, errors


def test_concurrent_first_opens_of_a_fresh_file_all_succeed(tmp_path):
    """The API and the worker may start at the same moment on a fresh state dir.

    Switching a new file to WAL can answer SQLITE_BUSY without calling the busy handler, so
    every opener must still get a migrated database instead of "database is locked".
    """
    for round_ in range(40):
        opened, errors = _open_together(tmp_path / f"fresh{round_}.db", 6)
        try:
            assert errors == [], f"round {round_}: {errors!r}"
            for d in opened:
                version = d.read(lambda c: c.execute("pragma user_version").fetchone()[0])
                assert version == len(MIGRATIONS)
                mode = d.writer.cursor().execute("pragma journal_mode").fetchone()[0]
                assert mode == "wal"
        finally:
            for d in opened:
                d.close()


async def test_worker_heartbeat_is_one_row_that_only_its_owner_clears(tmp_path):
    store = Store(Database(tmp_path / "sift.db"))
    try:
        assert await store.worker.get(0.0) is None
        await store.worker.beat(101, 1000.0, 1000.0)
        await store.worker.beat(101, 1000.0, 1002.5)
        assert await store.worker.get(0.0) == Heartbeat(101, 1000.0, 1002.5)
        await store.worker.beat(202, 2000.0, 2000.0)  # a standby took over
        assert await store.worker.get(0.0) == Heartbeat(202, 2000.0, 2000.0)
        await store.worker.clear(101)  # the old worker's late exit leaves the new heartbeat
        assert await store.worker.get(0.0) == Heartbeat(202, 2000.0, 2000.0)
        await store.worker.clear(202)
        assert await store.worker.get(0.0) is None
    finally:
        store.close()


def _where(c: apsw.Cursor) -> str:
    return threading.current_thread().name


async def test_writes_and_reads_go_to_their_own_threads_off_the_event_loop(db):
    assert (await db.on_writer(_where)).startswith("sift-db-write")
    assert (await db.on_reader(_where)).startswith("sift-db-read")
    await db.on_writer(lambda c: _insert_job(c, "async"))
    rows = await db.on_reader(lambda c: c.execute("select id from batch_job").fetchall())
    assert rows == [("async",)]


def test_a_checkpoint_never_waits_for_another_connections_write_lock(tmp_path):
    db = Database(tmp_path / "sift.db", busy_timeout=5)
    try:
        db.write(lambda c: _insert_job(c, "j1"))
        other = apsw.Connection(str(tmp_path / "sift.db"))
        other.execute("begin immediate")
        done = threading.Event()
        threading.Thread(target=lambda: (db.checkpoint(), done.set()), daemon=True).start()
        assert done.wait(2), "the passive checkpoint waited for the write lock"
        other.execute("rollback")
        other.close()
        assert _count_jobs(db) == 1
    finally:
        db.close()


def test_a_checkpoint_and_a_read_never_wait_for_each_other(db):
    db.write(lambda c: _insert_job(c, "j1"))
    with db._read_lock:  # a read in progress
        done = threading.Event()
        threading.Thread(target=lambda: (db.checkpoint(), done.set()), daemon=True).start()
        assert done.wait(2), "the checkpoint waited for a read"
    with db._checkpoint_lock:  # a checkpoint in progress
        assert _count_jobs(db) == 1


def test_commits_checkpoint_by_themselves_only_after_a_large_wal(db):
    for conn in (db.reader, db.writer):
        assert conn.execute("pragma wal_autocheckpoint").fetchone()[0] >= 10_000


# -- write_now / read_now: here when the database is free this instant, else on their thread ---


def _written_where(job_id: str):
    def write(c: apsw.Cursor) -> str:
        _insert_job(c, job_id)
        return threading.current_thread().name

    return write


async def test_write_now_writes_on_the_calling_thread_when_the_database_is_free(db):
    assert await db.write_now(_written_where("inline")) == threading.current_thread().name
    assert _count_jobs(db) == 1


async def test_write_now_never_waits_on_another_connections_lock_on_the_calling_thread(tmp_path):
    db = Database(tmp_path / "sift.db", busy_timeout=10.0)
    other = apsw.Connection(str(tmp_path / "sift.db"))
    other.cursor().execute("begin immediate")
    try:
        task = asyncio.ensure_future(db.write_now(_written_where("queued")))
        # The event loop keeps running while the write waits for the lock on the writer thread.
        await asyncio.sleep(0.3)
        assert not task.done()
        other.cursor().execute("commit")
        assert (await asyncio.wait_for(task, 5)).startswith("sift-db-write")
        assert _count_jobs(db) == 1  # written once, by the writer thread
    finally:
        if other.in_transaction:
            other.cursor().execute("rollback")
        other.close()
        db.close()


async def test_write_now_goes_to_the_writer_thread_while_that_thread_holds_the_write_helper(db):
    holding, release = threading.Event(), threading.Event()

    def hold(c):
        holding.set()
        release.wait(5)

    held = db.on_writer(hold)
    assert await asyncio.to_thread(holding.wait, 5)
    task = asyncio.ensure_future(db.write_now(_written_where("after")))
    await asyncio.sleep(0.05)
    assert not task.done()  # queued behind the held write, not blocking this loop
    release.set()
    await held
    assert (await task).startswith("sift-db-write")


async def test_read_now_reads_inline_and_gives_up_the_reader_only_when_it_is_taken(db):
    assert await db.read_now(_where) == threading.current_thread().name
    with db._read_lock:  # the reader is busy (a long read, say)
        task = asyncio.ensure_future(db.read_now(_where))
        await asyncio.sleep(0.05)
        assert not task.done()
    assert (await task).startswith("sift-db-read")


async def test_write_now_rolls_back_a_write_that_raises(db):
    def broken(c):
        _insert_job(c, "half")
        raise ValueError("boom")

    with pytest.raises(ValueError):
        await db.write_now(broken)
    assert _count_jobs(db) == 0
    await db.write_now(_written_where("after"))
    assert _count_jobs(db) == 1


async def test_a_watched_insert_wakes_after_its_commit_and_a_rollback_or_update_never(db):
    """docs/WORKER.md §Webhook sender: the worker's own commits that queue a delivery wake
    its sender; a write that rolled back, or only updated the table, does not."""
    woken = []
    db.watch_inserts("batch_job", lambda: woken.append(_count_jobs(db)))
    await db.write_now(lambda c: _insert_job(c, "a"))
    assert woken == [1]  # after the commit: a read already sees the row
    db.write(lambda c: c.execute("update batch_job set lease = 2.0"))

    def failing(c):
        _insert_job(c, "b")
        raise ValueError("rolled back")

    with pytest.raises(ValueError):
        db.write(failing)
    assert woken == [1]
    await db.on_writer(lambda c: _insert_job(c, "c"))
    assert woken == [1, 2]
