"""Run a caller's jq program over a JSON response, in a subprocess that cannot hurt us.

A jq program is a small Turing-complete language: `def f: f; f` never ends, `repeat(.)` writes
forever, `[range(1e9)]` eats memory. So the program is compiled and run in a fresh child
process (`jq_child.py`) with a wall-clock timeout enforced here, RLIMIT_CPU and RLIMIT_AS set in
the child, and output read only up to `max_output` bytes; past any of these the child is killed.
Like a render child it is the OOM killer's first choice (oom_score_adj 1000), and a process's
jq children together stay within `TOTAL_MEMORY` (`RenderPool.jq_slot` admits that many) and,
with the render children, within the pool's memory budget (`started` hands the pool the pid).
Compiling also happens in the child: jq compiles with its own C code, and a hostile program
can make even that slow. The child gets an empty environment (jq's `$ENV` reads nothing) and an
empty working folder (jq's `import` finds nothing), and the event loop keeps running meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from sift.errors import InvalidTarget

CHILD = str(Path(__file__).with_name("jq_child.py"))
MEMORY_LIMIT = 512 * 1024 * 1024  # address space of a child (the pipeline passes `[render] memory`)
TOTAL_MEMORY = 1024 * 1024 * 1024  # address space of a process's jq children together
STDERR_MAX = 64 * 1024
PROGRAM_MAX = 16 * 1024
LIMIT_MESSAGE = "jq program exceeded its time/output limit"
TIMEOUT = 5.0  # seconds of wall-clock time per program


async def run_jq(
    program: str,
    data: bytes | str,
    *,
    timeout: float = TIMEOUT,
    max_output: int = 10 * 1024 * 1024,
    nice: int = 0,
    memory: int = MEMORY_LIMIT,
    started: Callable[[int], None] | None = None,
) -> str:
    """Each result of `program` over `data` as compact JSON, one per line.

    Raises InvalidTarget with jq's message for a program that does not compile or fails at run
    time, "jq needs a JSON response" for input that is not JSON, and LIMIT_MESSAGE when the
    program runs past `timeout` seconds, its memory limit or `max_output` bytes of output.
    `nice`: the child's CPU priority (a heavy caller's runs yield, docs/SECURITY.md §Limits
    and isolation); `memory`: its address space; `started`: called with the child's pid. How
    many run at once is the caller's to bound (`RenderPool.jq_slot`).
    """
    out = await _run(
        program,
        data,
        timeout=timeout,
        max_output=max_output,
        nice=nice,
        memory=memory,
        started=started,
    )
    return out.decode("utf-8", "replace")


async def _run(
    program: str,
    data: bytes | str,
    *,
    timeout: float,
    max_output: int,
    nice: int = 0,
    memory: int = MEMORY_LIMIT,
    started: Callable[[int], None] | None = None,
) -> bytes:
    if len(program) > PROGRAM_MAX:
        raise InvalidTarget(f"jq: the program is longer than {PROGRAM_MAX} characters")
    payload = json.dumps(program).encode() + b"\n"
    body = data.encode("utf-8") if isinstance(data, str) else data
    args = [sys.executable, "-I", CHILD, str(math.ceil(timeout) + 1), str(memory)]
    with tempfile.TemporaryDirectory(prefix="sift-jq-") as cwd:
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={},
            cwd=cwd,
        )
        _first_to_go(proc.pid)  # the child does it too, first thing; this covers its start-up
        if started is not None:
            started(proc.pid)
        if nice:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, proc.pid, nice)
        try:
            async with asyncio.timeout(timeout):
                _, (out, over), (err, _) = await asyncio.gather(
                    _feed(proc, payload, body),
                    _read(proc.stdout, max_output, proc),
                    _read(proc.stderr, STDERR_MAX),
                )
                if over:
                    raise _Limit
                code = await proc.wait()
        except (TimeoutError, _Limit):
            raise InvalidTarget(LIMIT_MESSAGE) from None
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
    if code == 0:
        return out
    raise _child_error(code, err)


def _first_to_go(pid: int) -> None:
    """The OOM killer's first choice, as a render child is (oom_score_adj 1000)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/oom_score_adj", "w") as f:
        f.write("1000")


class _Limit(Exception):
    pass


async def _feed(proc: asyncio.subprocess.Process, *parts: bytes) -> None:
    """Write the input (the body as it is, not copied onto the program); a child that exits
    early (compile error, limit) closes the pipe."""
    assert proc.stdin is not None
    try:
        for part in parts:
            proc.stdin.write(part)
            await proc.stdin.drain()
        proc.stdin.close()
        await proc.stdin.wait_closed()
    except (BrokenPipeError, ConnectionResetError):
        pass


async def _read(
    stream: asyncio.StreamReader | None,
    limit: int,
    kill: asyncio.subprocess.Process | None = None,
) -> tuple[bytes, bool]:
    """The stream up to `limit` bytes, and whether it had more.

    Past the limit the child is killed when `kill` is given; otherwise the rest is drained and
    dropped, so a chatty child never blocks on a full pipe.
    """
    assert stream is not None
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(65536):
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
        elif kill is not None:
            with contextlib.suppress(ProcessLookupError):
                kill.kill()
            return b"", True
    return b"".join(chunks)[:limit], size > limit


def _child_error(code: int, err: bytes) -> InvalidTarget:
    try:
        report = json.loads(err.decode("utf-8", "replace"))
        kind, message = report["kind"], str(report["message"])
    except (ValueError, KeyError, TypeError):
        kind, message = "", ""
    if kind == "input":
        return InvalidTarget("jq needs a JSON response")
    if kind == "deep":
        return InvalidTarget("jq: the JSON response is nested too deeply to read")
    if kind in ("compile", "runtime"):
        return InvalidTarget(f"jq: {_one_line(message)}")
    # Killed by a signal (SIGXCPU, SIGKILL) or aborted by a failed allocation.
    return InvalidTarget(LIMIT_MESSAGE)


def _one_line(message: str) -> str:
    """jq's message without its "jq: error:" prefix and compile-error footer, on one line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    lines = [line for line in lines if not line.endswith("compile error")] or lines
    first = lines[0] if lines else "error"
    for prefix in ("jq: error: ", "jq: error ", "jq: "):
        first = first.removeprefix(prefix)
    return first.rstrip(":")[:500]
