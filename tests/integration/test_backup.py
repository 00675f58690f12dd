"""`sift backup`: an online copy of the database file while another process keeps writing."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

from sift.backup import BackupError, add_arguments, backup_database, open_source
from sift.cli.server import ServerError
from sift.store import NewTarget, batch_sql
from sift.store.db import Database
from sift.store.records import Caps, NewJob

ROOT = Path(__file__).resolve().parents[2]
BEFORE = 300  # jobs committed before the backup starts
OPTIONS = '{"mode": "clean", "pad": "' + "x" * 2000 + '"}'  # makes the file span many pages

# A second process that commits one job after another (ids w00000000, w00000001, …) until its
# stdin closes, with the same write helper the API and the worker use.
WRITER = textwrap.dedent(
    """
    import sys, threading
    from tests.integration.test_backup import add_job
    from sift.store.db import Database
    db = Database(sys.argv[1])
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    options = sys.argv[2]
    for seq in range(1_000_000):
        if stop.is_set():
            break
        add_job(db, f"w{seq:08d}", "writer", options)
        if seq == 0:
            print("ready", flush=True)
    db.close()
    """
)


def add_job(db: Database, job_id: str, caller: str, options: str) -> None:
    """One committed job of one target, through the store's submit transaction."""
    db.write(
        lambda c: batch_sql.submit(
            c,
            NewJob(job_id, caller, "fleet", job_id, [NewTarget("u", options)]),
            Caps(targets_per_job=1, jobs_per_caller=10**9, jobs_total=10**9),
            now=1.0,
            ttl=1e9,
        )
    )


def _create_jobs(path: Path, prefix: str, n: int) -> None:
    db = Database(path)
    try:
        for i in range(n):
            add_job(db, f"{prefix}{i:08d}", "before", OPTIONS)
    finally:
        db.close()


def _job_ids(path: Path, prefix: str) -> list[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute(
            "select id from batch_job where id like ? order by id", (prefix + "%",)
        ).fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows]


@pytest.fixture
def writer(tmp_path):
    db_path = tmp_path / "sift.db"
    _create_jobs(db_path, "b", BEFORE)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db_path), OPTIONS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield db_path
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0


def test_backup_while_another_process_writes_is_a_whole_consistent_copy(writer, tmp_path):
    dest = tmp_path / "copy.db"
    written_before = len(_job_ids(writer, "w"))
    # Small steps: the writer's commits restart the stepped copy, so the whole-snapshot step
    # must take over for the backup to finish at all.
    pages = backup_database(writer, dest, pages_per_step=8)
    written_after = len(_job_ids(writer, "w"))

    assert pages > 8
    assert written_after > written_before, "the writer must go on during the backup"
    conn = apsw.Connection(str(dest), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("pragma integrity_check").fetchall() == [("ok",)]
        assert conn.execute("pragma journal_mode").fetchall() == [("delete",)]
        assert conn.execute("pragma page_count").fetchone()[0] == pages
    finally:
        conn.close()
    assert _job_ids(dest, "b") == [f"b{i:08d}" for i in range(BEFORE)]
    copied = _job_ids(dest, "w")
    assert len(copied) >= written_before
    # One snapshot: the writer commits in order, so the copy holds exactly a prefix of its jobs.
    assert copied == [f"w{i:08d}" for i in range(len(copied))]


def test_backup_refuses_an_existing_destination_unless_overwrite(tmp_path):
    src = tmp_path / "sift.db"
    _create_jobs(src, "b", 3)
    dest = tmp_path / "copy.db"
    dest.write_bytes(b"keep me")
    with pytest.raises(BackupError, match="exists"):
        backup_database(src, dest)
    assert dest.read_bytes() == b"keep me"

    backup_database(src, dest, overwrite=True)
    assert _job_ids(dest, "b") == ["b00000000", "b00000001", "b00000002"]
    assert [p.name for p in tmp_path.iterdir() if ".part" in p.name] == []


def test_backup_file_is_readable_by_its_owner_only(tmp_path):
    src = tmp_path / "sift.db"
    _create_jobs(src, "b", 1)
    src.chmod(0o644)
    old = os.umask(0o022)
    try:
        backup_database(src, tmp_path / "copy.db")
    finally:
        os.umask(old)
    assert (tmp_path / "copy.db").stat().st_mode & 0o777 == 0o600


def test_backup_never_overwrites_the_database_itself(tmp_path):
    src = tmp_path / "sift.db"
    _create_jobs(src, "b", 1)
    with pytest.raises(BackupError, match="database itself"):
        backup_database(src, src, overwrite=True)
    assert _job_ids(src, "b") == ["b00000000"]


def test_backup_of_a_missing_database_creates_nothing(tmp_path):
    with pytest.raises(BackupError, match="does not exist"):
        backup_database(tmp_path / "sift.db", tmp_path / "copy.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another user")
def test_root_run_backup_leaves_the_wal_files_to_the_database_owner(tmp_path):
    src = tmp_path / "sift.db"
    _create_jobs(src, "b", 1)
    os.chown(src, 61234, 61234)  # a dynamic user's UID range
    assert not Path(f"{src}-wal").exists()
    conn = open_source(src)
    try:
        for suffix in ("-wal", "-shm"):
            assert Path(f"{src}{suffix}").stat().st_uid == 61234
    finally:
        conn.close()


def _parse(args: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sift backup")
    add_arguments(parser)
    return parser.parse_args(args)


def _config(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    cfg = tmp_path / "sift.toml"
    cfg.write_text(f'[store]\nstate_dir = "{state}"\n')
    _create_jobs(state / "sift.db", "b", 2)
    return cfg


def test_backup_verb_copies_the_configured_database(tmp_path, capsys):
    cfg = _config(tmp_path)
    dest = tmp_path / "copy.db"
    args = _parse([str(dest), "--config", str(cfg)])
    assert args.run(args) == 0
    assert _job_ids(dest, "b") == ["b00000000", "b00000001"]
    assert f"to {dest}" in capsys.readouterr().out


def test_backup_verb_reports_an_existing_destination_as_one_line(tmp_path):
    cfg = _config(tmp_path)
    dest = tmp_path / "copy.db"
    dest.write_bytes(b"")
    args = _parse([str(dest), "--config", str(cfg)])
    with pytest.raises(ServerError, match="--force"):
        args.run(args)
    args = _parse([str(dest), "--config", str(cfg), "--force"])
    assert args.run(args) == 0
    assert _job_ids(dest, "b") == ["b00000000", "b00000001"]


def test_backup_leaves_no_part_file_when_the_check_fails(tmp_path, monkeypatch):
    import sift.backup as backup_mod

    src = tmp_path / "sift.db"
    _create_jobs(src, "b", 1)

    def failing_check(part: Path) -> None:
        assert part.exists()
        raise BackupError("the copy failed its integrity check: simulated")

    monkeypatch.setattr(backup_mod, "_check", failing_check)
    with pytest.raises(BackupError, match="integrity"):
        backup_database(src, tmp_path / "copy.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sift.db"]
