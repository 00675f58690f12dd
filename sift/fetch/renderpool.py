"""Render children: where caller-chosen bytes are parsed, so a bomb fails only its own target.

HTML and PDF parsing (lxml, trafilatura, PDFium) and the other CPU steps of a target (grep,
the extractive ranking) run in long-lived child processes (`render_child`), each under an
address-space limit and a per-step CPU limit. A step that runs out of memory or crashes the
child fails its target with 413; one past its time fails with `timeout` (504); the child is
replaced and the API or worker never notices. See docs/SECURITY.md §Limits and isolation.

* Children are forked from a multiprocessing fork server that has the render modules
  imported, so a replacement is ready in milliseconds; they start on demand, up to
  `[render] children`, and are reused.
* One caller holds at most `[render] per_caller` children at once (the rest of its steps wait),
  so one caller's heavy targets cannot occupy every child.
* A step still running after `[render] demote_after` drops to nice 10, so short renders of
  other callers keep the CPU; a demoted child cannot be raised again and is replaced after.
* A caller whose step used more than `demote_after` of CPU time, or hit a limit (the child's,
  or a cap the step checks itself: a PDF stream's inflated size), starts its steps (and its jq
  runs) at nice 19 for the next `HEAVY_FOR` seconds: a caller sending bomb after bomb, each
  failing within `demote_after`, would otherwise always hold the CPU at full priority. CPU
  time, not wall time: a light step slowed down by others' load is not heavy.
* The fork server, the children and jq's children together stay within `[render]
  pool_memory` of PSS (`renderbudget`): past it idle children that hold more than their
  share are recycled, then the busy one using the most is killed and its step fails with
  413. No more than `[render] children` are alive at once (a warming child counts); a step
  waits for a free one up to its own time, then fails with `RenderBusy`.
* Replies are unpickled with an exact allow-list (plain data and `RESULT_TYPES`): a child
  that a hostile document took over still cannot make the parent run code
  (docs/SECURITY.md §What a render child can reach).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import sys
import types
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sift import errors
from sift.config import RenderConfig
from sift.errors import InvalidTarget, RenderBusy, SiftError, Timeout, TooLong
from sift.fetch import (
    content_signals,
    grep,
    jq,
    narrow,
    pdf,
    render,
    render_child,
    renderbudget,
    robotsrules,
    sandbox,
)

log = logging.getLogger("sift.render")

DEMOTED_NICE = 10
HEAVY_NICE = 19  # the lowest priority: what a heavy caller's steps start at
LIMIT_ERRORS = ("TooLong", "Timeout")  # a step that ended at one of these was a heavy one
HEAVY_FOR = 60.0  # seconds a caller's steps start demoted after a heavy one
WARM_CHILDREN = 1  # children started and warmed when a process opens its pipeline
WARM_TIMEOUT = 30.0  # seconds a warming render may take (a loaded machine at start-up)
OUT_OF_BAND = 1024 * 1024  # bytes arguments larger than this travel beside the pickle
SEND_SLICE = 256 * 1024  # what the transport may hold of a frame at once
REPLY_MAX = 256 * 1024 * 1024  # bytes of one reply; a longer one fails its step as too large
_COUNT = struct.Struct("!I")  # out-of-band buffers after the call frame
_HEADER = struct.Struct("!i")
_BIG = struct.Struct("!Q")
JQ_BASE = 64 * 1024 * 1024  # address space a jq child maps before its program runs
_context = None

# What a reply may name: the result classes of the steps, each by its exact module and name.
RESULT_TYPES: dict[tuple[str, str], type] = {
    (cls.__module__, cls.__qualname__): cls
    for cls in (
        render.Rendered,
        pdf.PdfText,
        grep.GrepResult,
        narrow.Narrowed,
        narrow.Text,
        robotsrules.RobotsRules,
        content_signals.Signals,
        content_signals.Line,
    )
}


def _forkserver():
    """The fork-server context, preloading the render modules (once per process)."""
    global _context
    if _context is None:
        _no_resource_tracker()
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(
            [*render_child.PRELOAD, *_main_preload(), render_child.FREEZE_MODULE]
        )
        _context = ctx
    return _context


def _no_resource_tracker() -> None:
    """Keep multiprocessing from starting its resource tracker, a process of its own (6.5 MB
    of PSS per API and worker, docs/BENCHMARKS.md §Render pool budget).

    The fork server starts it to clean up named semaphores and shared memory left by dead
    processes; the pool makes neither (its pipes are socket pairs), so there is nothing to
    track. Its probe and registrations go to /dev/null instead. If something in this process
    started the tracker already, it is left running.
    """
    from multiprocessing import resource_tracker

    tracker = resource_tracker._resource_tracker
    with contextlib.suppress(AttributeError, OSError):
        if tracker._fd is None:
            tracker._fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


def _forkserver_pid() -> int | None:
    """The fork server's pid, once it runs (its PSS counts in the pool's budget)."""
    from multiprocessing import forkserver

    return getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)


def _main_preload() -> list[str]:
    """The parent's main module, for the fork server to import once.

    Every child re-runs the parent's main module before its first step (multiprocessing's
    preparation: `python -m worker.main` re-runs `worker.main`, a console script re-runs the
    script); with nothing of it imported yet that cost each new child about 0.3 s of CPU, paid
    again after every bomb that cost its child its life. Imported in the server, it is cheap.
    """
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name:
        return [] if name.endswith("__main__") else [name]  # `-m pkg` is not re-run
    # A script is re-run from its path (the fork server's own "__main__" preload never takes
    # a path): what it imports comes preloaded, so re-running it costs next to nothing.
    found = set()
    for value in vars(main).values() if main else ():
        module = value.__name__ if isinstance(value, types.ModuleType) else None
        module = module or getattr(value, "__module__", None)
        if isinstance(module, str) and module != "__main__":
            found.add(module)
    return sorted(found)


class RenderPool:
    """Bounded, reused render children for one process (API or worker)."""

    def __init__(self, cfg: RenderConfig):
        self.cfg = cfg
        self._idle: list[_Child] = []
        self._slots = asyncio.Semaphore(cfg.children)
        self._jq = asyncio.Semaphore(max(1, jq.TOTAL_MEMORY // cfg.memory))
        self._jq_runs: set[_JqRun] = set()
        self._watcher: asyncio.Task | None = None
        self._meter = renderbudget.Meter()
        self._reader: ThreadPoolExecutor | None = None  # reads the budget's sizes
        self._callers: dict[Any, _Share] = {}
        self._heavy: dict[Any, float] = {}  # owner -> loop time its steps start demoted until
        self._all: set[_Child] = set()
        self._closed = False
        self._warming: asyncio.Future | None = None
        self.replaced = 0  # children that died or were retired
        self.over_budget = 0  # busy processes killed for the pool's memory budget
        self.total = 0  # bytes the pool held at the last sample

    async def run(self, owner: Any, fn: Callable, *args, timeout: float) -> Any:
        """`fn(*args)` in a child, for `owner`, within `timeout` seconds of wall and CPU time.

        Returns what `fn` returns, re-raises the `SiftError` it raised, and raises `Timeout`
        past the time limit, `TooLong` when the child ran out of memory and `RenderFailed`
        when it crashed. Every step runs in a child, whatever the size of its input: a small
        page is not a cheap one (a 14 KB table of row and column spans costs trafilatura a
        minute), so no size lets a step run in the serving process.
        """
        if timeout <= 0:
            raise timeout_error(self.cfg)
        loop = asyncio.get_running_loop()
        asked = loop.time()
        async with self.slot(owner, wait=timeout):
            timeout -= loop.time() - asked
            if timeout <= 0:
                raise timeout_error(self.cfg)
            heavy = self.is_heavy(owner)
            # A heavy caller's child is demoted and then replaced: it gets a new one, and the
            # warm, reusable children stay with the callers whose steps are light.
            child = None if heavy else self._take_idle()
            child = child or await self._spawn()
            if heavy:
                child.demote(HEAVY_NICE)
            child.busy = True
            child.steps += 1
            self._watch()
            try:
                return await child.call(fn, args, timeout, self.cfg)
            finally:
                child.busy = False
                if child.heavy:
                    self._mark_heavy(owner)
                if child.reusable and not self._closed:
                    self._idle.append(child)
                else:
                    self._retire(child)

    def _take_idle(self) -> _Child | None:
        """The most recently used idle child that is still alive (one killed while idle, by
        the OOM killer or an operator, is retired here rather than failing the next step)."""
        while self._idle:
            child = self._idle.pop()
            if child.alive():
                return child
            self._retire(child)
        return None

    def prestart(self, n: int = WARM_CHILDREN) -> None:
        """Start `n` children in the background, each warmed by one small render, so the
        first fetches after a start pay neither a fork nor a cold child's first render
        (docs/BENCHMARKS.md §Render isolation)."""
        if self._warming is None:
            self._warming = asyncio.ensure_future(self._warm(n))

    async def _warm(self, n: int) -> None:
        for _ in range(max(min(n, self.cfg.children - len(self._all)), 0)):
            async with self._slots:  # a warming child counts against `[render] children`
                if self._idle:  # a step has come and gone meanwhile: the pool is warm
                    return
                child = await self._spawn()
                try:
                    await child.call(render_child.warm_up, (), WARM_TIMEOUT, self.cfg)
                    if not self._all - {child} and not self.replaced:  # the first: say it once
                        _log_confinement(
                            await child.call(render_child.confinement, (), WARM_TIMEOUT, self.cfg)
                        )
                except SiftError:
                    self._retire(child)
                    return
                if self._closed or not child.reusable:
                    self._retire(child)
                    return
                self._idle.append(child)

    def is_heavy(self, owner: Any) -> bool:
        """`owner` had a step use more than `demote_after` of CPU time, or stop at a limit,
        within the last `HEAVY_FOR` seconds."""
        return self._heavy.get(owner, -1.0) > asyncio.get_running_loop().time()

    def _mark_heavy(self, owner: Any) -> None:
        now = asyncio.get_running_loop().time()
        self._heavy = {o: t for o, t in self._heavy.items() if t > now}  # bounded by the recent
        self._heavy[owner] = now + HEAVY_FOR

    @contextlib.asynccontextmanager
    async def jq_slot(self, owner: Any) -> AsyncIterator[_JqRun]:
        """A slot for a jq run: one of the jq runs the process admits at once (their address
        space together within `jq.TOTAL_MEMORY`), then `slot(owner)`. The run's child joins
        the pool's memory budget once it reports its pid (`_JqRun.started`); killed for the
        budget, the run fails as a render step would, 413."""
        async with self._jq, self.slot(owner):
            run = _JqRun(self, self.jq_memory)
            self._jq_runs.add(run)
            try:
                yield run
            except InvalidTarget:
                if run.over_budget:
                    raise _budget(self.cfg) from None
                raise
            finally:
                self._jq_runs.discard(run)

    @property
    def jq_memory(self) -> int:
        """A jq child's address space: `[render] memory`, and never more than the pool's whole
        budget above what the interpreter maps before the program runs."""
        return min(self.cfg.memory, JQ_BASE + self.cfg.pool_memory)

    @contextlib.asynccontextmanager
    async def slot(self, owner: Any, *, wait: float | None = None) -> AsyncIterator[None]:
        """One of the pool's slots, and one of `owner`'s share of them (jq runs use this too).
        Waiting longer than `wait` seconds for one raises `RenderBusy`."""
        share = self._callers.get(owner)
        if share is None:
            share = self._callers[owner] = _Share(self.cfg.per_caller)
        share.users += 1
        try:
            async with contextlib.AsyncExitStack() as held:
                try:
                    async with asyncio.timeout(wait):
                        await held.enter_async_context(share.sem)
                        await held.enter_async_context(self._slots)
                except TimeoutError:
                    raise self._busy_error(share) from None
                yield
        finally:
            share.users -= 1
            if share.users == 0:
                self._callers.pop(owner, None)

    def _busy_error(self, share: _Share) -> RenderBusy:
        if share.sem.locked():
            return RenderBusy(
                f"this caller's {self.cfg.per_caller} render children stayed busy with its "
                "other steps for this step's whole time ([render] per_caller)"
            )
        return RenderBusy(
            f"all {self.cfg.children} render children stayed busy for this step's whole time "
            "([render] children)"
        )

    # -- the memory budget (docs/SECURITY.md §The render pool's memory budget) ---------------

    def _watch(self) -> None:
        """Sample the pool's memory while a step runs (one task per pool)."""
        if self._watcher is None and not self._closed:
            self._watcher = asyncio.ensure_future(self._watching())

    async def _watching(self) -> None:
        try:
            while not self._closed:
                await self.enforce_budget()
                if not self._busy():
                    return  # the last sample came after the last step: idle children fit too
                await asyncio.sleep(renderbudget.interval(self.total, self.cfg.pool_memory))
        finally:
            self._watcher = None

    def _busy(self) -> bool:
        return any(c.busy for c in self._all) or any(r.pid for r in self._jq_runs)

    async def enforce_budget(self) -> None:
        """One sample: past `[render] pool_memory`, recycle idle children that hold more
        than their share, then kill the busy process using the most (`renderbudget.victims`).

        The sizes are read on a thread of the pool's own: a full PSS read walks each
        process's page tables (milliseconds for a child a bomb has grown), time the event
        loop owes to requests. The read is of the steps running when it began, so a kill
        spares a child running a newer step (`_Child.steps`) and a jq run that has ended: the
        next sample judges them on their own sizes."""
        budget = self.cfg.pool_memory
        # A process killed already is left out: its pages are on their way back.
        children = {c.pid: c for c in self._all if not c.over_budget}
        runs = {r.pid: r for r in self._jq_runs if r.pid and not r.over_budget}
        server = _forkserver_pid() if children else None
        pids = [*children, *runs, *([server] if server else [])]
        steps = {pid: c.steps for pid, c in children.items()}
        now = asyncio.get_running_loop().time()
        sizes = await self._measure(self._meter.sizes, pids, now)
        self.total = sum(sizes.values())
        if self.total <= budget:
            return
        sizes = await self._measure(self._meter.exact, pids)  # a kill never rests on an estimate
        if self._closed:
            return
        fixed = sizes.pop(server, 0) if server else 0
        self.total = fixed + sum(sizes.values())
        idle = [c.pid for c in self._idle if c.pid in sizes]
        idle_kill, busy_kill = renderbudget.victims(dict(sizes), idle, fixed, budget)
        for pid in idle_kill:
            child = children[pid]
            if child not in self._idle:  # taken for a step since the read: judged next time
                continue
            self.total -= sizes[pid]
            self._idle.remove(child)
            self._retire(child)
        for pid in busy_kill:
            child, run = children.get(pid), runs.get(pid)
            if child is not None and (child.steps != steps[pid] or not child.busy):
                continue
            if run is not None and run not in self._jq_runs:
                continue
            self.total -= sizes[pid]
            self.over_budget += 1
            log.warning(
                "render step killed for the pool's memory budget",
                extra={
                    "fields": {
                        "pid": pid,
                        "pss": sizes[pid],
                        "total": fixed + sum(sizes.values()),
                        "budget": budget,
                    }
                },
            )
            if child is not None:
                child.kill_over_budget()
            else:
                run.kill_over_budget()

    async def _measure(self, read: Callable, *args) -> dict[int, int]:
        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="sift-render-budget")
        return await asyncio.get_running_loop().run_in_executor(self._reader, read, *args)

    async def _spawn(self) -> _Child:
        child = await asyncio.to_thread(_Child.start, self.cfg)
        self._all.add(child)
        await child.connect()
        return child

    def _retire(self, child: _Child) -> None:
        self._all.discard(child)
        self.replaced += 1
        child.kill()

    async def close(self) -> None:
        self._closed = True
        for task in (self._warming, self._watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for child in list(self._all):
            child.kill()
        self._all.clear()
        self._idle.clear()
        if self._reader is not None:
            self._reader.shutdown(wait=False)

    @property
    def pids(self) -> list[int]:
        return [c.pid for c in self._all]


_READABLE: tuple[list[str], list[str]] | None = None


def _readable() -> tuple[list[str], list[str]]:
    """This process's code paths, for its children's sandbox (computed once: every module a
    child may import lazily is loaded here by the time the first child starts)."""
    global _READABLE
    if _READABLE is None:
        _READABLE = sandbox.code_paths()
    return _READABLE


def _log_confinement(state: Any) -> None:
    state = state if isinstance(state, dict) else {}
    if state.get("network_cut") and state.get("files"):
        log.info("render children are confined", extra={"fields": state})
    else:
        log.warning(
            "render children are only partly confined: this kernel refuses an unprivileged "
            "user and network namespace or Landlock (docs/SECURITY.md §What a render child "
            "can reach)",
            extra={"fields": state},
        )


class _Share:
    __slots__ = ("sem", "users")

    def __init__(self, n: int):
        self.sem = asyncio.Semaphore(n)
        self.users = 0


class _JqRun:
    """One jq run inside `RenderPool.jq_slot`: its child's pid once started, for the budget."""

    def __init__(self, pool: RenderPool, memory: int):
        self.pool = pool
        self.memory = memory
        self.pid: int | None = None
        self.over_budget = False

    def started(self, pid: int) -> None:
        self.pid = pid
        self.pool._watch()

    def kill_over_budget(self) -> None:
        """Kill the jq child, if that pid is still our child (once reaped, the number may
        already name another process)."""
        self.over_budget = True
        if self.pid and _parent_of(self.pid) == os.getpid():
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


class _Child:
    """One child process and the parent's end of its socket."""

    def __init__(self, proc, conn):
        self.proc = proc
        self.pid: int = proc.pid
        self._conn = conn
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reusable = True
        self.demoted = False
        self.heavy = False  # the last step used more CPU than demote_after, or hit a limit
        self.busy = False  # running a step
        self.steps = 0  # steps begun, so a budget read can tell the step it measured
        self.over_budget = False  # killed for the pool's memory budget
        self._schedstat: int | None = None

    @classmethod
    def start(cls, cfg: RenderConfig) -> _Child:
        ctx = _forkserver()
        ours, theirs = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=render_child.serve,
            args=(theirs, cfg.memory, cfg.recycle_rss, _readable(), cfg.pool_memory),
            daemon=True,
            name="sift-render",
        )
        proc.start()
        theirs.close()
        return cls(proc, ours)

    async def connect(self) -> None:
        sock = socket.socket(fileno=os.dup(self._conn.fileno()))
        self._conn.close()
        self.reader, self.writer = await asyncio.open_unix_connection(sock=sock)
        with contextlib.suppress(OSError):
            self._schedstat = os.open(f"/proc/{self.pid}/schedstat", os.O_RDONLY)

    def alive(self) -> bool:
        """The child has neither exited nor closed its end (both checks are non-blocking)."""
        if self.reader is not None and self.reader.at_eof():
            return False
        with contextlib.suppress(OSError, ValueError):
            return self.proc.is_alive()
        return False

    def cpu_seconds(self) -> float:
        """Time the child has spent on a CPU so far (its scheduler statistics, read with one
        `pread` of a descriptor kept open: a few µs, against about 40 for opening `stat`)."""
        if self._schedstat is not None:
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(os.pread(self._schedstat, 64, 0).split()[0]) / 1e9
        return _cpu_seconds(self.pid)

    async def call(self, fn: Callable, args: tuple, timeout: float, cfg: RenderConfig) -> Any:
        assert self.reader is not None and self.writer is not None
        self.reusable = False  # until a whole reply has been read
        self.heavy = True  # until it ends with a whole reply within its CPU allowance
        cpu_before = self.cpu_seconds()
        request = _request(fn, args, timeout)
        demote = asyncio.get_running_loop().call_later(cfg.demote_after, self.demote)
        try:
            async with asyncio.timeout(timeout):
                for frame in request:
                    await _send(self.writer, *frame)
                reply = await _read_frame(self.reader)
        except TimeoutError:
            raise timeout_error(cfg) from None
        except _TooBig:
            raise _memory(cfg) from None
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            raise await self._death(cfg) from None
        finally:
            demote.cancel()
        reply = _loads(reply)
        whole = (reply[0], len(reply)) in (("ok", 2), ("error", 5))
        limited = whole and reply[0] == "error" and reply[1] in LIMIT_ERRORS  # a step's own cap
        self.heavy = not whole or limited or self.cpu_seconds() - cpu_before > cfg.demote_after
        self.reusable = whole and not self.demoted
        return _result(reply, cfg)

    def demote(self, nice: int = DEMOTED_NICE) -> None:
        """A lower priority for the rest of this child's life (it cannot be raised again)."""
        if not self.demoted:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, self.pid, nice)
        self.demoted = True

    async def _death(self, cfg: RenderConfig) -> SiftError:
        """The error for a child that died in the middle of a step."""
        await asyncio.to_thread(self.proc.join, 5)
        code = self.proc.exitcode
        log.warning("render child died", extra={"fields": {"pid": self.pid, "exit": code}})
        if self.over_budget:
            return _budget(cfg)
        if code == -24:  # SIGXCPU: the step's CPU budget
            return timeout_error(cfg)
        return _memory(cfg)

    def kill_over_budget(self) -> None:
        """Kill the child in its step; the step fails as out of memory (`_budget`)."""
        self.over_budget = True
        self.reusable = False
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.proc.kill()

    def kill(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self._schedstat is not None:
            with contextlib.suppress(OSError):
                os.close(self._schedstat)
            self._schedstat = None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.proc.kill()
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self._conn.close()
        # Reap without blocking the loop; a killed child is gone within milliseconds.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self.proc.join(0)


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far; 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _request(fn: Callable, args: tuple, timeout: float) -> list[tuple[bytes | memoryview, ...]]:
    """A step as frames: the pickled call, then each large bytes argument as it is.

    The body is the step's big argument (up to `[fetch] max_body`); pickled in line it would
    be copied into the payload, and the copy (and the transport's copy of what the socket did
    not take at once) would sit beside the original until the child had it all. Out of band
    (pickle protocol 5) and sent a slice at a time, it is never copied on this side.
    """
    buffers: list[pickle.PickleBuffer] = []
    wrapped = tuple(
        pickle.PickleBuffer(a) if isinstance(a, bytes) and len(a) > OUT_OF_BAND else a for a in args
    )
    main = pickle.dumps((fn, wrapped, timeout), protocol=5, buffer_callback=buffers.append)
    return [(_COUNT.pack(len(buffers)), main), *((b.raw(),) for b in buffers)]


async def _send(writer: asyncio.StreamWriter, *parts: bytes | memoryview) -> None:
    """One frame of these parts: up to `SEND_SLICE` in one write, so the child wakes once for
    the whole frame (a write per part woke it for each head and count on its own, and on a
    loaded machine every wake-up may wait for a core); larger, a slice at a time, each written
    once the transport has taken the last (docs/SECURITY.md §Limits and isolation)."""
    size = sum(len(part) for part in parts)
    if size <= SEND_SLICE:
        writer.write(b"".join((_frame_head(size), *parts)))
        await writer.drain()
        return
    writer.write(_frame_head(size))
    for part in parts:
        view = memoryview(part)
        for at in range(0, len(view), SEND_SLICE):
            writer.write(view[at : at + SEND_SLICE])
            if len(view) > SEND_SLICE:
                await writer.drain()
    await writer.drain()


def _frame_head(n: int) -> bytes:
    """A `multiprocessing.Connection` frame's head: 4-byte length, or -1 and an 8-byte one."""
    if n > 0x7FFFFFFF:
        return _HEADER.pack(-1) + _BIG.pack(n)
    return _HEADER.pack(n)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    """One reply frame, refused (as a child out of memory would be) past `REPLY_MAX` bytes:
    whatever a child sends is read into this process's memory."""
    (n,) = _HEADER.unpack(await reader.readexactly(4))
    if n == -1:
        (n,) = _BIG.unpack(await reader.readexactly(8))
    if n > REPLY_MAX:
        raise _TooBig
    return await reader.readexactly(n)


class _TooBig(Exception):
    pass


def _result(reply: tuple, cfg: RenderConfig) -> Any:
    kind = reply[0]
    if kind == "ok" and len(reply) == 2:
        return reply[1]
    if kind == "error" and len(reply) == 5:
        raise _error(*reply[1:])
    if kind == "limit":
        raise _memory(cfg)
    log.warning("render step failed", extra={"fields": {"error_type": str(reply[1:2])[:100]}})
    raise errors.RenderFailed("the document could not be rendered (the renderer failed on it)")


def _error(name: Any, msg: Any, hint: Any, extra: Any) -> SiftError:
    """The `SiftError` a child reported, rebuilt only from what is plainly well-formed: a
    `SiftError` class by name, text, and scalar extras that cannot stand in for envelope keys."""
    cls = getattr(errors, name, None) if isinstance(name, str) else None
    if not (isinstance(cls, type) and issubclass(cls, SiftError)):
        cls = errors.TargetError
    scalar = (str, int, float, bool, type(None))
    well_formed = (
        isinstance(msg, str)
        and isinstance(hint, str | None)
        and isinstance(extra, dict)
        and all(
            isinstance(k, str) and k not in errors.ENVELOPE_KEYS and k.isidentifier() for k in extra
        )
        and all(isinstance(v, scalar) for v in extra.values())
    )
    if not well_formed:
        return errors.RenderFailed("the renderer sent a malformed error")
    try:
        return cls(msg, hint=hint, **extra)
    except TypeError:
        return errors.RenderFailed("the renderer sent a malformed error")


def timeout_error(cfg: RenderConfig) -> Timeout:
    return Timeout(
        f"processing took longer than the {cfg.timeout:g} s allowed after the download "
        "([render] timeout)"
    )


def _memory(cfg: RenderConfig) -> TooLong:
    mib = cfg.memory // (1024 * 1024)
    return TooLong(
        f"the document needs more than the renderer's {mib} MiB memory limit "
        "([render] memory); it is too large or built to exhaust memory"
    )


def _budget(cfg: RenderConfig) -> TooLong:
    mib = cfg.pool_memory // (1024 * 1024)
    return TooLong(
        "the document needed more memory than its share of the render pool's "
        f"{mib} MiB ([render] pool_memory), shared by the steps running at once; it is too "
        "large or built to exhaust memory"
    )


class _Unpickler(pickle.Unpickler):
    """A reply is plain data (which pickle writes without naming any class) and the result
    types of `RESULT_TYPES`, each found by its exact module and name: never any other global,
    never a dotted name (protocol 4 resolves `a.b` as an attribute path, which reaches
    whatever a module imported)."""

    def find_class(self, module: str, name: str):
        found = RESULT_TYPES.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"render child sent a forbidden class {module}.{name}")
        return found

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("render child sent a persistent reference")


def _loads(data: bytes) -> tuple:
    """The reply tuple; `RenderFailed` for anything else (a child that sends a forbidden class
    or a malformed reply is treated as one that crashed)."""
    try:
        reply = _Unpickler(io.BytesIO(data)).load()
    except Exception as e:
        log.warning("render child sent a bad reply", extra={"fields": {"error": str(e)[:200]}})
        return ("crash", "bad reply")
    if not isinstance(reply, tuple) or not reply:
        return ("crash", "bad reply")
    return reply
