"""The state dir is private to the service's user: nobody else reads a caller's URLs and
bodies in `sift.db`, or holds `worker.lock` to keep the worker on standby.

Every process that writes there (`sift serve`, `sift-worker`, `sift up`) first sets umask 077,
so whatever it creates is 0600 (files) or 0700 (folders) whoever started it, and tightens a
state dir and state files left readable by an earlier version or a hand-made folder. Under
systemd, `StateDirectoryMode=0700` and `UMask=0077` say the same (docs/SECURITY.md §Limits and
isolation).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
STATE_FILES = ("sift.db", "sift.db-wal", "sift.db-shm", "worker.lock", "keys.toml")


def make_private(state_dir: Path) -> None:
    """umask 077 for this process; the state dir 0700 and its state files 0600."""
    os.umask(0o077)
    _tighten(state_dir, DIR_MODE)
    for name in STATE_FILES:
        _tighten(state_dir / name, FILE_MODE)


def _tighten(path: Path, mode: int) -> None:
    """Drop group and other bits of a path we own; links and others' files are left alone."""
    with contextlib.suppress(FileNotFoundError, PermissionError):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
            return
        if stat.S_IMODE(st.st_mode) & ~mode:
            os.chmod(path, stat.S_IMODE(st.st_mode) & mode, follow_symlinks=False)


def create(state_dir: Path) -> None:
    """Make a missing state dir (and its parents) 0700, as every process does at start
    (docs/OPERATIONS.md §Running it); a path in the way or an unwritable parent is left for
    the start's one-line check to report."""
    old = os.umask(0o077)
    try:
        with contextlib.suppress(OSError):
            Path(state_dir).mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    finally:
        os.umask(old)
