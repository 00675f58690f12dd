"""A PostgreSQL restart under a running store (docs/OPERATIONS.md §Running on several boxes):
calls fail as 503 `StoreBusy` while it is down, never hang or crash the process, and the store
works again once it is back. Own server: restarting it would cut every other test's sessions."""

from __future__ import annotations

import pytest

from sift import config
from sift.store import StoreBusy, open_store
from tests.contract.test_batch_store import T0, _submit
from tests.pg import SKIP_PREFIX, PgServer, unavailable


@pytest.fixture
def own_server():
    reason = unavailable()
    if reason:
        pytest.skip(SKIP_PREFIX + reason)
    with PgServer() as server:
        yield server


async def test_a_database_restart_costs_a_retry_not_the_process(own_server, tmp_path, monkeypatch):
    monkeypatch.delenv("SIFT_DATABASE_URL", raising=False)
    dsn = own_server.fresh_database()
    raw = {"store": {"state_dir": str(tmp_path), "engine": "postgres", "dsn": dsn}}
    store = open_store(config.from_dict(raw))
    try:
        await _submit(store.batch, "before", T0)
        own_server.restart()
        answers = []
        while len(answers) < 20 and (not answers or answers[-1] == "busy"):
            try:  # each pooled session cut by the restart fails once and is dropped
                answers.append(await store.batch.job("before"))
            except StoreBusy:
                answers.append("busy")
        assert answers[-1] not in ("busy", None)
        assert (await _submit(store.batch, "after", T0 + 1)).kind == "created"
    finally:
        await store.aclose()
