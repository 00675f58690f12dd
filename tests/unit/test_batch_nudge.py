"""The nudge datagram and the worker socket's address rules."""

from __future__ import annotations

import os
import socket

import pytest

from sift.nudge import MAX_SUN_PATH, Nudger, SocketAddress, socket_path


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
