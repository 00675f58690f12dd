"""The nudge datagram and the worker socket's address rules."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from sift.nudge import MAX_SUN_PATH, WAITS_NAME, Nudger, SocketAddress, socket_path
from worker.listener import NudgeListener


def bound(state_dir) -> tuple[socket.socket, SocketAddress]:
    addr = SocketAddress(state_dir)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(addr.address)
    sock.settimeout(2)
    return sock, addr


def test_the_nudge_reaches_the_socket_in_the_state_dir(state_dir):
    sock, addr = bound(state_dir)
    try:
        assert addr.address == str(state_dir / "worker.sock")
        with Nudger(state_dir) as nudger:
            assert nudger.send()
        assert sock.recv(16) == b"n"
    finally:
        sock.close()
        addr.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_state_dir_too_long_for_a_socket_path_still_uses_its_worker_sock(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    assert len(os.fsencode(socket_path(deep))) > MAX_SUN_PATH
    sock, addr = bound(deep)
    try:
        assert (deep / "worker.sock").exists()
        with Nudger(deep) as nudger:
            assert nudger.send()
        assert sock.recv(16) == b"n"
    finally:
        sock.close()
        addr.close()


def test_a_nudge_with_no_worker_listening_is_not_an_error(state_dir):
    with Nudger(state_dir) as nudger:
        assert nudger.send() is False


def test_the_slot_wait_flag_lives_exactly_while_the_listener_says_a_job_waits(state_dir):
    """docs/WORKER.md §The scheduler: a dead worker's flag goes at bind, ours at close."""
    flag = state_dir / WAITS_NAME
    flag.touch()  # left by a worker that died waiting
    listener = NudgeListener(state_dir, lambda: None)
    listener.bind()
    try:
        assert not flag.exists()
        with Nudger(state_dir) as nudger:
            assert nudger.slot_freed() is False  # nothing waits: nothing sent
            listener.waiting(True)
            assert flag.exists() and stat.S_IMODE(flag.stat().st_mode) == 0o600
            assert nudger.slot_freed() is True
            assert listener.sock.recv(16) == b"g"
            listener.waiting(False)
            assert not flag.exists() and nudger.slot_freed() is False
            listener.waiting(True)
    finally:
        listener.close()
    assert not flag.exists()
    listener.waiting(True)  # a late hook after close writes nothing
    assert not flag.exists()
