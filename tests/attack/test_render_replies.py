"""A render child taken over by a hostile document can neither make its parent run code nor
reach the network or the parent's files through inherited descriptors (docs/SECURITY.md §What
a render child can reach).

Crafted replies go through the parent's real unpickler, and through a real pool from a real
forked child that writes its own frame on its socket, as a taken-over child would.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import struct
from pathlib import Path

import pytest

from sift.config import RenderConfig
from sift.errors import RenderFailed
from sift.fetch import render_child
from sift.fetch.render import Rendered
from sift.fetch.renderpool import RenderPool, _loads


def _text(s: str) -> bytes:
    data = s.encode()
    return pickle.SHORT_BINUNICODE + bytes([len(data)]) + data


def dotted_global_call(module: str, name: str, arg: str) -> bytes:
    """A protocol 4 pickle calling `module`'s attribute path `name` with `arg`: what the old
    allow-list (any public name of a sift module) let through as `sift.x` + `os.system`."""
    return (
        pickle.PROTO
        + b"\x04"
        + _text("ok")
        + _text(module)
        + _text(name)
        + pickle.STACK_GLOBAL
        + _text(arg)
        + pickle.TUPLE1
        + pickle.REDUCE
        + pickle.TUPLE2
        + pickle.STOP
    )


def test_a_reply_naming_os_system_through_a_sift_module_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    reply = _loads(dotted_global_call("sift.fetch.renderpool", "os.system", f"touch {marker}"))
    assert reply[0] == "crash"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("sift.fetch.renderpool", "os.system"),
        ("sift.fetch.render_child", "os.system"),
        ("sift.fetch.renderpool", "pickle.loads"),
        ("sift.errors", "TargetError"),  # a public sift class, but no step's result
        ("sift.fetch.render", "Rendered.__init__"),
        ("builtins", "eval"),
        ("os", "system"),
    ],
)
def test_a_reply_may_name_only_the_exact_result_types(module, name):
    assert _loads(dotted_global_call(module, name, "x"))[0] == "crash"


def test_a_reply_of_a_result_type_and_plain_data_is_read_back():
    result = Rendered("t", "c", {"author": None})
    reply = pickle.dumps(("ok", (result, [1, 2.0, b"x", {"k": {1, 2}}], frozenset())), protocol=5)
    assert _loads(reply) == ("ok", (result, [1, 2.0, b"x", {"k": {1, 2}}], frozenset()))


def send_a_crafted_reply(marker: str) -> str:
    """In the child: write a reply frame of our own on the socket to the parent, the way a
    child taken over by a hostile document would, before the real one."""
    payload = dotted_global_call("sift.fetch.renderpool", "os.system", f"touch {marker}")
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                os.write(int(name), struct.pack("!i", len(payload)) + payload)
    return "the real reply"


async def test_a_taken_over_child_replying_os_system_makes_the_parent_run_nothing(tmp_path):
    marker = tmp_path / "ran"
    pool = RenderPool(RenderConfig())
    try:
        with pytest.raises(RenderFailed):
            await pool.run("mallory", send_a_crafted_reply, str(marker), timeout=10)
        assert not marker.exists()
        assert await pool.run("mallory", len, b"abc", timeout=10) == 3  # a new child serves
    finally:
        await pool.close()


def raise_a_forged_error() -> None:
    """In the child: an error reply whose extras would overwrite the failure envelope."""
    raise RenderFailed("forged", success=True)


async def test_an_error_reply_cannot_forge_the_envelope():
    pool = RenderPool(RenderConfig())
    try:
        with pytest.raises(RenderFailed) as caught:
            await pool.run("mallory", raise_a_forged_error, timeout=10)
        assert caught.value.envelope()["success"] is False
    finally:
        await pool.close()


def open_descriptors() -> dict[int, str]:
    """In the child: its open descriptors and what each points to."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return out


def read_descriptor(fd: int) -> bytes | str:
    try:
        return os.pread(fd, 16, 0)
    except OSError as e:
        return f"refused: {e.strerror}"


def connect(port: int) -> str:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError as e:
        return f"refused: {e.strerror}"
    return "connected"


async def test_a_render_child_holds_no_descriptor_but_its_socket_and_cannot_read_the_parents(
    tmp_path: Path,
):
    db = tmp_path / "sift.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    held = os.open(db, os.O_RDONLY)  # as the store holds its database open
    os.set_inheritable(held, True)
    pool = RenderPool(RenderConfig())
    try:
        fds = await pool.run("mallory", open_descriptors, timeout=10)
        assert fds[0] == fds[1] == os.devnull
        others = {fd: target for fd, target in fds.items() if fd > 2}
        assert len(others) == 1 and next(iter(others.values())).startswith("socket:"), fds
        assert not any("sift.db" in target for target in fds.values())
        assert str(await pool.run("mallory", read_descriptor, held, timeout=10)).startswith(
            "refused"
        )
    finally:
        await pool.close()
        os.close(held)


def namespaces_refused() -> bool:
    """Whether this kernel refuses an unprivileged user and network namespace (checked in a
    throwaway child, never in the test process)."""
    pid = os.fork()
    if pid == 0:
        os._exit(
            0
            if render_child._unshare(render_child.CLONE_NEWUSER | render_child.CLONE_NEWNET)
            else 1
        )
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0


async def test_a_render_child_cannot_open_a_connection_to_loopback():
    if namespaces_refused():
        pytest.skip("this kernel refuses unprivileged user and network namespaces")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    pool = RenderPool(RenderConfig())
    try:
        port = listener.getsockname()[1]
        assert (await pool.run("mallory", connect, port, timeout=10)).startswith("refused")
        assert await pool.run("mallory", render_child.confinement, timeout=10) == {
            "network_cut": True
        }
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing came in
        assert connect(port) == "connected"  # while the test process itself can
    finally:
        await pool.close()
        listener.close()
