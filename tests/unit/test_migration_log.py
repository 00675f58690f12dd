"""A database's migrations are one log line per run, naming the file (docs/OPERATIONS.md
§Upgrades): a fresh file says which versions it went through, an up-to-date one says nothing."""

from __future__ import annotations

import logging

from sift.store.db import Database
from sift.store.schema import MIGRATIONS


def test_a_migration_run_is_one_log_line_naming_the_file(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="sift")
    path = tmp_path / "sift.db"
    Database(path).close()
    lines = [r.getMessage() for r in caplog.records if "migrated" in r.getMessage()]
    assert lines == [f"store: {path} migrated from schema version 0 to {len(MIGRATIONS)}"]
    caplog.clear()
    Database(path).close()
    assert not [r for r in caplog.records if "migrated" in r.getMessage()]
