"""The nudge: one Unix datagram from the API to the worker's `state_dir/worker.sock`.

A nudge carries no data; it only wakes the worker sooner than its next poll, so sending never
blocks and never fails loudly (no worker, a full queue: polling still picks the job up).

Socket paths are limited to 107 bytes (`sun_path`). When `state_dir/worker.sock` is longer, both
sides reach the same file through `/proc/self/fd/N/worker.sock`, N being a descriptor of the
state dir they hold open: the socket stays where the spec puts it, no process changes its
working directory, and nothing moves to a shared /tmp. Without /proc (not Linux) a long path is
a clear one-line error instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from pathlib import Path

SOCKET_NAME = "worker.sock"
# Present while a drain job waits for a gate slot: the API sends `SLOT_FREED` only then
# (docs/WORKER.md §The scheduler).
WAITS_NAME = "worker.slotwait"
MAX_SUN_PATH = 107  # bytes of sockaddr_un.sun_path, leaving its terminating NUL
NUDGE = b"n"  # a job was submitted or cancelled
SLOT_FREED = b"g"  # a gate slot was given back (docs/WORKER.md §The scheduler)
HOOKS = b"h"  # webhook deliveries were queued again (redeliver; docs/WORKER.md §Webhook sender)

log = logging.getLogger("sift.nudge")


class SocketPathError(Exception):
    """The worker socket cannot be addressed; the message says why."""


def socket_path(state_dir: str | os.PathLike) -> Path:
    return Path(state_dir) / SOCKET_NAME


class SocketAddress:
    """The address to bind or send to for a state dir, short even when the dir's path is long.

    Holds a descriptor of the state dir while a long path needs one; `close()` releases it.
    """

    def __init__(self, state_dir: str | os.PathLike):
        self.path = socket_path(state_dir)
        self._dir_fd: int | None = None
        if len(os.fsencode(self.path)) <= MAX_SUN_PATH:
            self.address = str(self.path)
            return
        if not Path("/proc/self/fd").is_dir():
            raise SocketPathError(
                f"state dir path too long for a Unix socket ({len(os.fsencode(self.path))} "
                f"bytes, at most {MAX_SUN_PATH}): choose a shorter [store] state_dir"
            )
        try:
            self._dir_fd = os.open(self.path.parent, os.O_PATH | os.O_DIRECTORY)
        except OSError as e:
            raise SocketPathError(f"state dir {self.path.parent}: {e.strerror}") from None
        self.address = f"/proc/self/fd/{self._dir_fd}/{SOCKET_NAME}"

    def close(self) -> None:
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._dir_fd)
            self._dir_fd = None


class Nudger:
    """The API's sender: `send()` after a submit or cancel has committed."""

    def __init__(self, state_dir: str | os.PathLike):
        self._addr = SocketAddress(state_dir)
        self._waits = Path(state_dir) / WAITS_NAME
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)

    def send(self, what: bytes = NUDGE) -> bool:
        """Wake the worker; False when no worker listens or its queue is full (polling covers)."""
        try:
            self._sock.sendto(what, self._addr.address)
        except OSError as e:
            log.debug("nudge not delivered: %s", e.strerror or e)
            return False
        return True

    __call__ = send

    def slot_freed(self) -> bool:
        """An interactive fetch gave its gate slots back: a batch job skipped for lack of room
        may go now, rather than at the worker's next poll. Sent only while the worker says a
        job waits for a slot (a stat, not a wake-up of the worker after every fetch)."""
        return self._waits.exists() and self.send(SLOT_FREED)

    def hooks(self) -> None:
        """Deliveries were queued (a redeliver): the worker's webhook sender takes them now,
        rather than at its next poll."""
        self.send(HOOKS)

    def cancelled(self) -> None:
        """A cancel committed: the drain drops the job, and the sender takes the delivery of
        its `job.cancelled` event, if its webhook asks for it (a submit wakes only the drain)."""
        self.send(NUDGE)
        self.send(HOOKS)

    def close(self) -> None:
        self._sock.close()
        self._addr.close()

    def __enter__(self) -> Nudger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
