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
import stat
import struct
from pathlib import Path

import pytest

from sift.config import RenderConfig
from sift.errors import RenderFailed
from sift.fetch import render_child, sandbox
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


def open_descriptors() -> dict[int, tuple[int, int, int]]:
    """In the child: each open descriptor's (file type, device, inode), found with `fstat`
    (a child cannot list /proc)."""
    out = {}
    for fd in range(4096):
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            out[fd] = (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino)
    return out


def send_a_crafted_reply(marker: str) -> str:
    """In the child: write a reply frame of our own on each socket it holds (one is its
    parent's), the way a child taken over by a hostile document would, before the real one."""
    payload = dotted_global_call("sift.fetch.renderpool", "os.system", f"touch {marker}")
    for fd, (kind, _, _) in open_descriptors().items():
        if kind == stat.S_IFSOCK:
            with contextlib.suppress(OSError):
                os.write(fd, struct.pack("!i", len(payload)) + payload)
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
        null = os.stat(os.devnull)
        assert fds[0][1:] == fds[1][1:] == (null.st_dev, null.st_ino)
        others = [kind for fd, (kind, _, _) in fds.items() if fd > 2]
        assert others == [stat.S_IFSOCK], fds
        mine = os.fstat(held)
        assert (mine.st_dev, mine.st_ino) not in {(d, i) for _, d, i in fds.values()}
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
        os._exit(0 if sandbox.unshare_network() else 1)
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
        assert (await pool.run("mallory", render_child.confinement, timeout=10))["network_cut"]
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing came in
        assert connect(port) == "connected"  # while the test process itself can
    finally:
        await pool.close()
        listener.close()


def read_file(path: str) -> bytes | str:
    try:
        with open(path, "rb") as f:
            return f.read(64)
    except OSError as e:
        return f"refused: {e.strerror}"


def signal_zero(pid: int) -> str:
    try:
        os.kill(pid, 0)
    except OSError as e:
        return f"refused: {e.strerror}"
    return "delivered"


def import_late() -> str:
    """A module no child has imported yet, from the interpreter's library."""
    import colorsys

    return colorsys.rgb_to_hsv(1, 0, 0) and "imported"


@pytest.mark.skipif(sandbox.abi() < 1, reason="this kernel has no Landlock")
async def test_a_render_child_cannot_read_the_services_files_by_path(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    secrets = [state / "sift.db", state / "keys.toml", tmp_path / "sift.toml"]
    for path in secrets:
        path.write_bytes(b"secret")
        path.chmod(0o600)
    pool = RenderPool(RenderConfig())
    try:
        for path in secrets:
            assert str(await pool.run("mallory", read_file, str(path), timeout=10)).startswith(
                "refused"
            )
        assert await pool.run("mallory", read_file, sandbox.__file__, timeout=10) != b""
        assert await pool.run("mallory", import_late, timeout=10) == "imported"
        assert (await pool.run("mallory", render_child.confinement, timeout=10))["files"]
    finally:
        await pool.close()
    assert read_file(str(secrets[0])) == b"secret"  # the test process itself can


@pytest.mark.skipif(sandbox.abi() < 6, reason="this kernel's Landlock has no scopes")
async def test_a_render_child_cannot_signal_the_process_it_serves():
    pool = RenderPool(RenderConfig())
    try:
        assert (await pool.run("mallory", signal_zero, os.getpid(), timeout=10)).startswith(
            "refused"
        )
    finally:
        await pool.close()
