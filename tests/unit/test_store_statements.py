"""The drain's store calls on SQLite, counted in statements (docs/WORKER.md §The store's
transactions, statement budget): a count the machine's load does not move, so a statement
added to the path of every target fails here rather than hiding in a noisy benchmark."""

from __future__ import annotations

import apsw
import pytest

from sift.store import Store
from sift.store.db import Database
from tests.storekit import submit

T0 = 1_700_000_000.0
RESULT = '{"content": "' + "x" * 50_000 + '"}'


@pytest.fixture
async def store(tmp_path):
    s = Store(Database(tmp_path / "sift.db"))
    yield s
    s.close()


class Counted:
    """Every statement the writer connection runs while in the block."""

    def __init__(self, store: Store):
        self.conn: apsw.Connection = store._db.writer
        self.sql: list[str] = []

    def __enter__(self) -> Counted:
        self.conn.exec_trace = self._trace
        return self

    def __exit__(self, *exc) -> None:
        self.conn.exec_trace = None

    def _trace(self, _cur, sql: str, _bindings) -> bool:
        self.sql.append(sql)
        return True


async def test_a_stored_target_with_its_chained_claim_is_ten_statements(store):
    for job in ("a", "other"):
        await submit(store.batch, job, T0, n=4)
    claim = await store.batch.claim("a", T0)
    with Counted(store) as counted:
        finished = await store.batch.finish(
            "a", claim.idx, status="done", outcome="ok", seconds=0.1, now=T0 + 1,
            result=RESULT, max_bytes=10**9, then_claim=["a"],
        )  # fmt: skip
    assert finished.stored and finished.next.idx == 1
    assert len(counted.sql) == 10, counted.sql  # begin and commit included


async def test_a_claim_of_a_running_job_is_five_statements(store):
    await submit(store.batch, "a", T0, n=4)
    first = await store.batch.claim("a", T0)
    await store.batch.finish("a", first.idx, status="done", outcome="ok", seconds=0.1, now=T0)
    with Counted(store) as counted:
        assert (await store.batch.claim("a", T0 + 1)).idx == 1
    assert len(counted.sql) == 5, counted.sql  # begin and commit included


async def test_a_finish_without_a_webhook_writes_no_outbox_statement(store):
    await submit(store.batch, "a", T0, n=2)
    claim = await store.batch.claim("a", T0)
    with Counted(store) as counted:
        await store.batch.finish("a", claim.idx, status="done", outcome="ok", seconds=0.1, now=T0)
    assert not [s for s in counted.sql if "webhook_outbox" in s]
