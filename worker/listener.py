"""The nudge socket: a Unix datagram socket at `state_dir/worker.sock`.

A datagram only wakes the drain (the callback sets a flag); polling remains the guarantee. The
socket is bound only once this worker holds the singleton lock, so a standby never disturbs the
active worker's socket, and a stale file from a dead worker is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from pathlib import Path

from sift.nudge import HOOKS, SLOT_FREED, SocketAddress


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

    def bind(self) -> None:
        self._addr = SocketAddress(self.state_dir)  # SocketPathError if it cannot be addressed
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._addr.path)  # a dead worker's socket; we hold the lock
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind(self._addr.address)
        self.sock = sock

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
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self._addr is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._addr.path)
            self._addr.close()
            self._addr = None
