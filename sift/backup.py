"""`sift backup DEST`: an online copy of `state_dir/sift.db` while the API and worker write.

SQLite's backup API copies pages from a read transaction, and in WAL mode a reader never blocks
a writer, so the services go on while the copy is made. The copy is taken in steps so that a
long copy gives the disk back between chunks; but another process's write makes SQLite restart
a stepped backup from the first page, so after a few restarts the rest is copied in one step,
a single consistent snapshot (writers still go on: they append to the WAL meanwhile).

The copy is written beside DEST, switched out of WAL mode (one self-contained file), checked,
and only then moved to DEST, so DEST is either absent or a whole, valid database.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
import sys
import time
from pathlib import Path

import apsw

PAGES_PER_STEP = 4096  # 16 MiB with SQLite's default 4 KiB pages
MAX_RESTARTS = 2  # stepped copies restarted by writers before one whole-snapshot step
STEP_PAUSE = 0.005  # seconds between steps, so the copy leaves the disk to the services
BUSY_MS = 10_000


class BackupError(Exception):
    """The backup could not be made; the message says why."""


def backup_database(
    src: Path,
    dest: Path,
    *,
    overwrite: bool = False,
    check: bool = True,
    pages_per_step: int = PAGES_PER_STEP,
    max_restarts: int = MAX_RESTARTS,
) -> int:
    """Copy the live database `src` to `dest`; returns the number of pages copied.

    Refuses an existing `dest` unless `overwrite`. With `check`, the copy must pass
    `pragma integrity_check` before it takes `dest`'s name.
    """
    src, dest = Path(src), Path(dest)
    if not src.is_file():
        raise BackupError(f"database {src} does not exist")
    if dest.exists() and not overwrite:
        raise BackupError(f"{dest} exists (pass --force to overwrite it)")
    if dest.exists() and dest.resolve() == src.resolve():
        raise BackupError("the backup cannot overwrite the database itself")
    if not dest.parent.is_dir():
        raise BackupError(f"folder {dest.parent} does not exist")
    part = dest.with_name(f".{dest.name}.part-{os.getpid()}")
    try:
        # The copy holds cached pages and batch results: readable by its owner only.
        os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as e:
        raise BackupError(f"cannot write in {dest.parent}: {e.strerror}") from None
    try:
        pages = _copy(src, part, pages_per_step, max_restarts)
        if check:
            _check(part)
        _publish(part, dest, overwrite)
    except apsw.Error as e:
        raise BackupError(f"backup of {src} failed: {e}") from None
    finally:
        for leftover in (part, Path(f"{part}-journal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return pages


def open_source(src: Path) -> apsw.Connection:
    """A connection to the live database whose WAL files belong to the database's owner.

    Run as root while the services are stopped, SQLite would create `-wal` and `-shm` as root,
    and a service starting meanwhile under its own (dynamic) user could not open the database.
    The state dir belongs to that user, who could swap either file for a link to a file of
    root's: so no path in it is followed (SQLite opens the database with NOFOLLOW, a WAL file
    that is a symbolic link is refused) and ownership is handed over through a descriptor
    opened with O_NOFOLLOW, only for a plain, singly linked file that root owns.
    """
    src = src.parent.resolve() / src.name  # the folders' links are root's (e.g. /var/lib/sift)
    owner = src.lstat()
    root_run = os.geteuid() == 0 and owner.st_uid != 0
    if root_run:
        for suffix in ("-wal", "-shm"):
            _refuse_link(Path(f"{src}{suffix}"))
    source = apsw.Connection(str(src), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_NOFOLLOW)
    source.setbusytimeout(BUSY_MS)
    source.execute("pragma schema_version").fetchall()  # opens (or creates) -wal and -shm
    if root_run:
        try:
            for suffix in ("-wal", "-shm"):
                _hand_over(Path(f"{src}{suffix}"), owner.st_uid, owner.st_gid)
        except BackupError:
            source.close()
            raise
    return source


def _refuse_link(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(path.lstat().st_mode):
            raise BackupError(f"{path} is a symbolic link; refusing to open it as root")


def _hand_over(path: Path, uid: int, gid: int) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BackupError(f"{path} is a symbolic link; refusing to change its owner") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise BackupError(f"{path} is not a plain file; refusing to change its owner")
        if st.st_uid == 0:
            os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


def _copy(src: Path, part: Path, pages_per_step: int, max_restarts: int) -> int:
    source = open_source(src)
    target = apsw.Connection(str(part))
    try:
        restarts, last_remaining = 0, None
        with target.backup("main", source, "main") as b:
            while not b.done:
                whole = restarts >= max_restarts
                _step(b, -1 if whole else pages_per_step)
                if last_remaining is not None and b.remaining > last_remaining:
                    restarts += 1
                last_remaining = b.remaining
                if not b.done:
                    time.sleep(STEP_PAUSE)
            pages = b.pagecount
        target.execute("pragma journal_mode=delete").fetchall()
        return pages
    finally:
        target.close()
        source.close()


def _step(b: apsw.Backup, pages: int) -> None:
    """One step; a source briefly locked (WAL recovery, a checkpoint) is waited for."""
    deadline = time.monotonic() + BUSY_MS / 1000
    while True:
        try:
            b.step(pages)
            return
        except (apsw.BusyError, apsw.LockedError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _check(part: Path) -> None:
    conn = apsw.Connection(str(part), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        result = [row[0] for row in conn.execute("pragma integrity_check")]
    finally:
        conn.close()
    if result != ["ok"]:
        raise BackupError(f"the copy failed its integrity check: {'; '.join(result[:3])}")


def _publish(part: Path, dest: Path, overwrite: bool) -> None:
    with open(part, "rb") as f:
        os.fsync(f.fileno())
    if overwrite:
        os.replace(part, dest)
    else:
        try:
            os.link(part, dest)  # never clobbers a DEST that appeared meanwhile
        except FileExistsError:
            raise BackupError(f"{dest} exists (pass --force to overwrite it)") from None
    with contextlib.suppress(OSError):
        dirfd = os.open(dest.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `sift backup` arguments; sets `run` to `backup`."""
    parser.add_argument("dest", help="file to write the copy to (must not exist)")
    parser.add_argument("--force", action="store_true", help="overwrite DEST if it exists")
    parser.add_argument("--config", help="config file (default: $SIFT_CONFIG or built-in)")
    parser.set_defaults(run=backup)


def backup(args: argparse.Namespace) -> int:
    """`sift backup DEST [--force] [--config FILE]`: one line on success, exit 2 on failure."""
    from sift.cli.server import ServerError, load_config

    cfg = load_config(args.config)
    dest = Path(args.dest)
    try:
        pages = backup_database(cfg.db_path, dest, overwrite=args.force)
    except BackupError as e:
        raise ServerError(str(e)) from None
    size = dest.stat().st_size
    print(f"sift: backed up {cfg.db_path} to {dest} ({pages} pages, {size} bytes)")
    sys.stdout.flush()
    return 0
