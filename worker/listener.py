"""The nudge socket: a Unix datagram socket at `state_dir/worker.sock`.

A datagram only wakes the drain (the callback sets a flag); polling remains the guarantee. The
socket is bound only once this worker holds the singleton lock, so a standby never disturbs the
active worker's socket, and a stale file from a dead worker is replaced.

The listener also keeps `state_dir/worker.slotwait` present exactly while a drain job waits for
a gate slot (`waiting`), so the API sends its "slot freed" datagram only when one can matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path

from sift.nudge import HOOKS, SLOT_FREED, WAITS_NAME, SocketAddress

log = logging.getLogger("sift.worker")


class NudgeListener:
    def __init__(
        self,
        state_dir: Path,
        on_nudge: Callable[[], None],
        on_slot_freed: Callable[[], None] | None = None,
        on_hooks: Callable[[], None] | None = None,
    ):
        self.state_dir = Path(state_dir)
        self.on_nudge = on_nudge
        self.on_slot_freed = on_slot_freed
        self.on_hooks = on_hooks
        self.sock: socket.socket | None = None
        self._addr: SocketAddress | None = None
        self._waits_path = self.state_dir / WAITS_NAME
        self._waits: bool | None = None  # None: unknown, the next `waiting` writes
        self._closed = False

    def bind(self) -> None:
        self._addr = SocketAddress(self.state_dir)  # SocketPathError if it cannot be addressed
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._addr.path)  # a dead worker's socket; we hold the lock
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind(self._addr.address)
        self.sock = sock
        self.waiting(False)  # a dead worker's flag

    def waiting(self, waits: bool) -> None:
        """The drain's hook (`HostRoom.on_waiting`): whether a job waits for a gate slot now.
        A syscall only when that changes; a failure leaves it unknown, and polling covers."""
        if waits is self._waits or self._closed:
            return
        try:
            if waits:
                flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
                os.close(os.open(self._waits_path, flags, 0o600))
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._waits_path)
        except OSError as e:
            log.warning("worker: slot-wait flag not written (%s)", type(e).__name__)
            self._waits = None
            return
        self._waits = waits

    async def run(self) -> None:
        """Receive nudges until cancelled; a socket error ends the task (the worker stops)."""
        assert self.sock is not None, "bind() first"
        loop = asyncio.get_running_loop()
        while True:
            data = await loop.sock_recv(self.sock, 64)
            if data == SLOT_FREED:
                if self.on_slot_freed is not None:
                    self.on_slot_freed()
            elif data == HOOKS:
                if self.on_hooks is not None:
                    self.on_hooks()
            else:
                self.on_nudge()

    def close(self) -> None:
        if self._waits is not None:
            self.waiting(False)
        self._closed = True
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self._addr is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._addr.path)
            self._addr.close()
            self._addr = None
