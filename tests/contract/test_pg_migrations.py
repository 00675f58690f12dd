"""The PostgreSQL engine's migrations (docs/OPERATIONS.md §Running on several boxes): boxes
that start together migrate the database exactly once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import psycopg

from sift.store.pg.db import migrate, redact
from sift.store.pg.schema import MIGRATIONS


def test_boxes_starting_together_migrate_once(pg_dsn):
    with ThreadPoolExecutor(6) as pool:
        versions = list(pool.map(lambda _: migrate(pg_dsn), range(6)))
    assert versions == [len(MIGRATIONS)] * 6
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("select version from sift_schema order by version").fetchall()
    assert [r[0] for r in rows] == list(range(1, len(MIGRATIONS) + 1))


def test_migrating_again_changes_nothing(pg_dsn):
    migrate(pg_dsn)
    assert migrate(pg_dsn) == len(MIGRATIONS)


def test_a_dsn_in_messages_never_shows_its_password():
    shown = redact("postgresql://sift:s3cret@db.internal:5432/sift")
    assert "s3cret" not in shown and "db.internal" in shown


def test_an_unreachable_database_is_a_clear_start_up_error(tmp_path, monkeypatch):
    import pytest

    from sift import config
    from sift.store import StoreError, open_store

    monkeypatch.delenv("SIFT_DATABASE_URL", raising=False)
    dsn = f"postgresql://sift:s3cret@/sift?host={tmp_path}&connect_timeout=1"
    cfg = config.from_dict(
        {"store": {"state_dir": str(tmp_path), "engine": "postgres", "dsn": dsn}}
    )
    with pytest.raises(StoreError) as info:
        open_store(cfg)
    assert str(tmp_path) in str(info.value) and "s3cret" not in str(info.value)
