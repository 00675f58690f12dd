"""`sift backup` run as root never changes a file it reached through the service user's link
(docs/OPERATIONS.md §Backups, docs/SECURITY.md §Limits and isolation)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sift.backup import BackupError, backup_database
from tests.integration.test_backup import _create_jobs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own files as another")

SERVICE_UID = 61234  # a dynamic user's UID range


def service_owned_db(tmp_path: Path) -> Path:
    src = tmp_path / "sift.db"
    _create_jobs(src, "b", 1)
    os.chown(src, SERVICE_UID, SERVICE_UID)
    return src


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_a_wal_file_swapped_for_a_symlink_is_refused_and_its_target_keeps_its_owner(
    tmp_path, suffix
):
    src = service_owned_db(tmp_path)
    victim = tmp_path / "root-only"
    victim.write_text("root's\n")
    os.symlink(victim, f"{src}{suffix}")
    with pytest.raises(BackupError, match="symbolic link"):
        backup_database(src, tmp_path / "copy.db")
    assert victim.stat().st_uid == 0
    assert victim.read_text() == "root's\n"
    assert not (tmp_path / "copy.db").exists()


def test_a_database_that_is_a_symlink_is_refused(tmp_path):
    real = service_owned_db(tmp_path)
    link = tmp_path / "state" / "sift.db"
    link.parent.mkdir()
    os.symlink(real, link)
    with pytest.raises(BackupError):
        backup_database(link, tmp_path / "copy.db")


def test_a_state_dir_reached_through_a_folder_link_is_backed_up(tmp_path):
    """systemd's DynamicUser state dir /var/lib/sift is a link to /var/lib/private/sift."""
    real = tmp_path / "private"
    real.mkdir()
    service_owned_db(real)
    (tmp_path / "sift").symlink_to(real)
    backup_database(tmp_path / "sift" / "sift.db", tmp_path / "copy.db")
    assert (tmp_path / "copy.db").stat().st_size > 0


def test_a_wal_file_swapped_for_a_symlink_after_sqlite_opened_it_is_not_chowned(
    tmp_path, monkeypatch
):
    """The race of the finding: the swap lands between SQLite's open and the hand-over."""
    import apsw

    from sift import backup

    src = service_owned_db(tmp_path)
    victim = tmp_path / "root-only"
    victim.write_text("root's\n")
    real = apsw.Connection

    class Swapping(real):
        def execute(self, sql, *args, **kwargs):
            out = real.execute(self, sql, *args, **kwargs)
            if "schema_version" in sql:
                shm = Path(f"{src}-shm")
                shm.unlink()
                shm.symlink_to(victim)
            return out

    monkeypatch.setattr(backup.apsw, "Connection", Swapping)
    with pytest.raises(BackupError, match="symbolic link"):
        backup.open_source(src)
    assert victim.stat().st_uid == 0
