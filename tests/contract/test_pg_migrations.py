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


def test_a_stored_result_is_compressed_with_lz4_where_the_server_has_it(pg_dsn):
    """docs/WORKER.md §The store's transactions: the server compresses a large result with
    lz4 (the throwaway server, PostgreSQL 15 from the distribution, is built with it)."""
    migrate(pg_dsn)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "insert into batch_job(id, caller, caller_class, idem_key, status, targets_total, "
            "created_at, lease) values ('a', 'c', 'k', 'i', 'done', 1, 0, 0)"
        )
        text = " ".join(f"word{i % 997}" for i in range(6000))  # compressible, above 2 KB
        conn.execute(
            "insert into batch_target(job_id, idx, url, options, status, result) "
            "values ('a', 0, 'u', '{}', 'done', %s)",
            (text,),
        )
        got = conn.execute("select pg_column_compression(result) from batch_target").fetchone()
    assert got[0] == "lz4"
