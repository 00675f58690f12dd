"""`PgDatabase.statement` runs one statement, so one snapshot (docs/ARCHITECTURE.md §The
store's surface): a second one is refused, and the status read with its retry links is one."""

from __future__ import annotations

import pytest

from sift.store.pg.db import OneStatementOnly, PgDatabase, one
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
