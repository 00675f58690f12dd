"""The jq subprocess: one caller's program over one JSON document, under hard limits.

Run as a script (`python -I jq_child.py SECONDS MEMORY_BYTES`), never imported by Sift, so it
needs nothing but the jq and orjson packages. Input on stdin: the program as one JSON string
line, then the document. Output on stdout: each result as compact JSON, one per line. On a
caller error it writes `{"kind": ..., "message": ...}` to stderr and exits with status 2.
The parent kills it on its wall-clock timeout or when the output grows past its limit; the CPU
and address-space limits set here stop it even if the parent is gone.
"""

import contextlib
import importlib.util
import json
import os
import resource
import sys

EXIT_CALLER_ERROR = 2


def _limit(which: int, value: int) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (value, value))


_report_fd = 2


def _fail(kind: str, message: str) -> None:
    report = json.dumps({"kind": kind, "message": message[:2000]}).encode()
    os.write(_report_fd, report)
    sys.exit(EXIT_CALLER_ERROR)


def _silence_stderr() -> None:
    """Keep the report channel for us; jq's `debug` and `stderr` output goes nowhere."""
    global _report_fd
    _report_fd = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def _first_to_go() -> None:
    """The OOM killer's first choice, before the API or worker (as a render child is)."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def _confine() -> None:
    """Once jq and orjson are imported: a network namespace of its own and Landlock letting it
    read only the interpreter's and its packages' code (a lazy codec import still works; a jq
    `import` still finds nothing), no TCP, no signals outside, where the kernel allows each
    (docs/SECURITY.md §Untrusted programs and patterns). `sandbox.py` is loaded by path:
    this script imports nothing of Sift."""
    try:
        spec = importlib.util.spec_from_file_location(
            "sift_jq_sandbox", os.path.join(os.path.dirname(__file__), "sandbox.py")
        )
        sandbox = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sandbox)
    except (OSError, ImportError, AttributeError):
        return
    sandbox.unshare_network()
    sandbox.restrict(*sandbox.code_paths())


def main() -> None:
    _first_to_go()
    cpu_seconds, memory = int(sys.argv[1]), int(sys.argv[2])
    _limit(resource.RLIMIT_CPU, cpu_seconds)
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)

    _silence_stderr()

    import jq
    import orjson

    _confine()

    stdin = sys.stdin.buffer
    program = json.loads(stdin.readline())
    data = stdin.read()
    try:
        compiled = jq.compile(program)
    except ValueError as e:
        _fail("compile", str(e))
    try:
        text = data.decode("utf-8-sig")
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            json.loads(text)  # orjson refuses a few valid documents (integers past 64 bits)
    except ValueError:
        _fail("input", "not JSON")
    except RecursionError:
        _fail("deep", "nested too deeply")
    out = sys.stdout.buffer
    try:
        for value in compiled.input_text(text):
            try:
                line = orjson.dumps(value)
            except TypeError:
                line = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
            out.write(line + b"\n")
    except ValueError as e:
        out.flush()
        _fail("runtime", str(e))
    except MemoryError:
        _fail("limit", "memory")
    out.flush()


if __name__ == "__main__":
    main()
