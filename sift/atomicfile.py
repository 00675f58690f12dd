"""Replace a file whole or not at all: the text goes to a fresh temporary file beside it
(`O_EXCL`, so nothing planted there is followed), gets its mode, and is renamed over the
name. A reader sees the old file or the new one, never half of one, and a symbolic or hard
link planted at the name is replaced, never written through (docs/SECURITY.md §Terminal
output, docs/SECURITY.md §Auth)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace_file(path: Path, text: str, mode: int, *, prefix: str = ".sift-") -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def signature(path: Path) -> tuple[int, int, int] | None:
    """What tells one version of a file from the next (inode, size, modification time): a
    replace gives a new inode, an edit in place a new size or time; None when it is missing.
    One `stat`, so a reader re-reads the file only when this changes."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
