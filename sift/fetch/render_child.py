"""The render child: runs one CPU step at a time for its parent, under hard limits.

A child is forked from a server process that has already imported the render modules, so a
new child is ready in milliseconds, and it is reused for many steps. It sets its own limits
first: an address-space limit (a bomb's allocation fails here, not in the API or the worker),
no core dumps, no file writes. Before each step it moves its CPU-time limit to "used so far +
the step's budget", so a step that spins gets SIGXCPU even if its parent is gone; and it is
the kernel's first choice when memory runs out (oom_score_adj 1000). It closes every
descriptor but its socket to the parent, leaves the network (a user and network namespace
of its own) and restricts itself with Landlock (reads only code; no TCP, no signals outside),
each where the kernel allows it. It exits
after a step that ran out of memory, or once its peak RSS has grown past the recycle size
(CPython rarely returns a big render's heap to the system).

Wire format (`multiprocessing.Connection` frames, pickled): request `(fn, args, cpu_seconds)`
pickled with protocol 5, its frame starting with a 4-byte count of the out-of-band buffers
(the large bodies) that follow as frames of their own; reply `("ok", result)`,
`("error", class_name, msg, hint, extra)` for a `SiftError`, `("limit", "memory")` or
`("crash", type_name)`.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import resource
import signal
import struct
import warnings

from sift.errors import SiftError

# Imported here so the fork server preloads them and every child starts with them in memory.
from sift.fetch import digest, grep, pdf, recover, render, robotsrules, sandbox  # noqa: F401

PRELOAD = ["sift.fetch.render_child"]

# A child re-runs the parent's main module (`python -m worker.main`) before its first step, and
# the fork server already imported it (renderpool._main_preload) to make that cheap; runpy then
# warns, on the process's stderr, about a module that is meant to be there. Set in the fork
# server, so every child inherits it.
warnings.filterwarnings(
    "ignore", message=r".*found in sys\.modules after import of package", category=RuntimeWarning
)
FREEZE_MODULE = "sift.fetch.render_freeze"  # the fork server's last import
_HEAD = struct.Struct("!i")  # a `multiprocessing.Connection` frame's length
_FRAME_MAX = 0x7FFFFFFF  # longer frames have an 8-byte length after -1


def serve(
    conn,
    memory: int,
    recycle_rss: int,
    readable: tuple[list[str], list[str]] = ([], []),
    pool_memory: int = 0,
) -> None:
    """Answer the parent's requests on `conn` until it closes, or a limit says stop.
    `readable`: the parent's `sandbox.code_paths()` (the fork server imported nothing the
    parent has not, so they cover this process's code too). The address space is `memory`,
    and no more than what the child maps now plus `pool_memory`: one child alone cannot grow
    past the whole pool's budget (docs/SECURITY.md §The render pool's memory budget)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if pool_memory:
        memory = min(memory, mapped() + pool_memory)
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_FSIZE, 0)
    _first_to_go()
    _confine(conn.fileno(), readable)
    while True:
        try:
            fn, args, cpu_seconds = receive(conn)
        except (EOFError, OSError):
            return
        _cpu_budget(cpu_seconds)
        reply = call(fn, args)
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            reply, data = ("limit", "memory"), pickle.dumps(("limit", "memory"))
        try:
            send_frame(conn, data)
        except OSError:
            return
        if reply[0] in ("limit", "crash") or (recycle_rss and peak_rss() > recycle_rss):
            return


def warm_up() -> None:
    """A few small renders, so the first real step does not pay for what a first call costs
    (the pages the render touches copied from the fork server, the libraries' lazy set-up)."""
    for mode in ("clean", "markdown", "text", "links"):
        render.render_body("html", _WARM_PAGE, "text/html; charset=utf-8", mode, _WARM_URL)
    grep.grep("warm\nup", "warm")


_WARM_URL = "http://warm.invalid/a"
_WARM_PAGE = (
    b"<html><head><title>Warm</title><meta name=description content='warm'>"
    b"<link rel=canonical href='/a'></head><body><nav><a href='/'>Home</a></nav><article>"
    b"<h1>Warm</h1>"
    + b"<p>A paragraph of text to extract, with a <a href='/x'>link</a> and <em>words</em>.</p>"
    * 30
    + b"<ul><li>one</li><li>two</li></ul><pre><code class='language-py'>x = 1</code></pre>"
    b"<table><tr><th>a</th></tr><tr><td>1</td></tr></table><img src='/i.png' alt='i'>"
    b"</article><footer>Footer</footer></body></html>"
)


def send_frame(conn, data: bytes) -> None:
    """A reply as one `Connection` frame in one write: `send_bytes` writes the head and a
    payload over 16 KiB apart, which wakes the parent twice per reply."""
    if len(data) > _FRAME_MAX:
        conn.send_bytes(data)
        return
    view = memoryview(_HEAD.pack(len(data)) + data)
    while view:
        view = view[os.write(conn.fileno(), view) :]


def receive(conn) -> tuple:
    """One request: the call frame, then its out-of-band buffers."""
    head = conn.recv_bytes()
    (count,) = struct.unpack_from("!I", head)
    buffers = [conn.recv_bytes() for _ in range(count)]
    return pickle.loads(memoryview(head)[4:], buffers=buffers)


def call(fn, args) -> tuple:
    """`fn(*args)` as a reply tuple (see the wire format above)."""
    try:
        return ("ok", fn(*args))
    except SiftError as e:
        return ("error", type(e).__name__, e.msg, e.__dict__.get("hint"), dict(e.extra))
    except MemoryError:
        return ("limit", "memory")
    except Exception as e:
        return ("crash", type(e).__name__)


def _confine(keep: int, readable: tuple[list[str], list[str]]) -> None:
    """Narrow what a child taken over by a hostile document can reach (docs/SECURITY.md
    §What a render child can reach): only its socket to the parent stays open (stdin and stdout
    become /dev/null; stderr stays for a crash's traceback); it moves into a user and network
    namespace of its own, where no interface is up; and Landlock lets it read only code, open
    no TCP connection, and signal or reach no abstract socket outside its own domain. None of
    it needs root; what the kernel refuses is left out, and `confinement` says what held."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.closerange(3, keep)
    os.closerange(keep + 1, _FD_MAX)
    global _NETWORK_CUT, _SANDBOX
    _NETWORK_CUT = sandbox.unshare_network()
    _SANDBOX = sandbox.restrict(*readable)


_FD_MAX = 1 << 20
_NETWORK_CUT = False
_SANDBOX: dict[str, bool] = {}


def confinement() -> dict[str, bool]:
    """What `_confine` achieved in this child (the parent logs it once at start)."""
    return {"network_cut": _NETWORK_CUT, **_SANDBOX}


def _first_to_go() -> None:
    """Make this child the OOM killer's first choice, before the API or worker it serves."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def _cpu_budget(seconds: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + max(seconds, 0.1))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _limit(which: int, value: int) -> None:
    with contextlib.suppress(ValueError, OSError):
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def mapped() -> int:
    """This process's address space in bytes now (`statm`'s first field; read before the
    sandbox, which hides /proc)."""
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def address_limit() -> int:
    """The address-space limit this child runs under (for tests and the start-up log)."""
    return resource.getrlimit(resource.RLIMIT_AS)[0]


def peak_rss() -> int:
    """This process's peak resident set size in bytes (one syscall, no file to read)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
