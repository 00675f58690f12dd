"""Slot files: the lock-file primitive the gates are built from.

A slot is a file under `gates/`; holding it means holding a non-blocking exclusive `flock` on
an fd this process keeps open. `flock` (not `lockf`/`fcntl` record locks) because its locks
belong to the open file description: two fds opened on the same file conflict even inside one
process, and closing an unrelated fd never drops a lock, which POSIX record locks do. The kernel
drops the lock when the holder exits, however it dies, so a crashed process frees its slots.

Re-locking an fd that already holds the lock succeeds, so the table also records which names it
holds and for whom (an owner token per permit): a second `try_take` of a held name fails without
a syscall, which keeps two tasks of one process from sharing a slot, and `give_back` only
unlocks for the owner that took it, so a stale release can never free a later holder's slot.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import threading
from pathlib import Path

# Idle fds kept open for the next acquire; beyond this a released slot's fd is closed.
MAX_IDLE_FDS = 256

_OPEN_FLAGS = os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW

# The deployment's key for the slot hash, in the gates directory (mode 0600); never a slot name.
SECRET_FILE = "secret"
SECRET_BYTES = 32


def load_secret(directory: Path) -> bytes:
    """The key every process of this deployment hashes hosts and callers with, made once.

    Written to a temporary file and linked into place, so two processes starting together
    agree on one key and neither ever reads a partial file (docs/GATES.md §Keyed buckets).
    """
    path = Path(directory) / SECRET_FILE
    if not path.exists():
        tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, secrets.token_bytes(SECRET_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process linked its key first: that one is the key
        finally:
            os.unlink(tmp)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        key = os.read(fd, SECRET_BYTES + 1)
    finally:
        os.close(fd)
    if stat.S_IMODE(mode) & 0o077 or len(key) != SECRET_BYTES:
        raise OSError(
            f"{path}: not a 0600 file of {SECRET_BYTES} bytes; remove it to make a new key"
        )
    return key


class SlotTable:
    """The slot files of one gates directory as seen by one process.

    Not a process-wide singleton: two tables on the same directory hold separate fds and so
    exclude each other like two processes would.
    """

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self._fds: dict[str, int] = {}
        self._held: dict[str, object] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._secret = load_secret(self.dir)

    def secret(self) -> bytes:
        """The key of this deployment's slot hash (`load_secret`)."""
        return self._secret

    def try_take(self, name: str, owner: object) -> bool:
        """Lock slot `name` for `owner` without waiting; False when anyone (this process
        included) holds it."""
        with self._lock:
            self._after_fork()
            if name in self._held:
                return False
            fd = self._fds.get(name)
            if fd is None:
                fd = os.open(self.dir / name, _OPEN_FLAGS, 0o600)
                self._fds[name] = fd
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return False
                raise
            self._held[name] = owner
            return True

    def give_back(self, name: str, owner: object) -> None:
        """Unlock slot `name` if `owner` holds it; otherwise do nothing."""
        with self._lock:
            # In a forked child this forgets the inherited slots first: their open file
            # descriptions are shared with the parent, and unlocking one would free its slot.
            self._after_fork()
            if self._held.get(name) is not owner:
                return
            del self._held[name]
            fd = self._fds[name]
            fcntl.flock(fd, fcntl.LOCK_UN)
            if len(self._fds) > MAX_IDLE_FDS:
                del self._fds[name]
                os.close(fd)

    def give_back_all(self, names: list[str], owner: object) -> None:
        for name in names:
            self.give_back(name, owner)

    def take_any(self, prefix: str, size: int, owner: object, reserve: int = 0) -> str | None:
        """The first free slot of group `prefix` (`prefix.0` … `prefix.{size-1}`) for `owner`,
        or None; with `reserve`, None also when taking it would leave fewer than `reserve`
        others free (checked by taking and giving back)."""
        for n in range(size):
            name = f"{prefix}.{n}"
            if self.try_take(name, owner):
                if reserve and not self._another_free(prefix, size, n):
                    self.give_back(name, owner)
                    return None
                return name
        return None

    def _another_free(self, prefix: str, size: int, taken: int) -> bool:
        probe = object()
        for m in range(taken + 1, size):
            name = f"{prefix}.{m}"
            if self.try_take(name, probe):
                self.give_back(name, probe)
                return True
        return False

    def held(self) -> frozenset[str]:
        with self._lock:
            self._after_fork()
            return frozenset(self._held)

    def close(self) -> None:
        """Close every fd, which drops every lock this table holds."""
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            self._held.clear()

    def _after_fork(self) -> None:
        # A forked child inherits the fds and the held set; it holds nothing of its own. Closing
        # its copies leaves the parent's locks alone (the parent's fds keep them).
        if self._pid == os.getpid():
            return
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._held.clear()
        self._pid = os.getpid()
