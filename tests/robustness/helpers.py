"""Tools for the robustness suite, on top of `tests/e2e/procs.py`.

Everything here works on real parts: the config file the processes read, the keys file, the
database file (read through its own read-only apsw connection), and separate processes that
hold the database's write lock or start a product process against a broken state dir.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from sift.auth import add_key
from tests import harness
from tests.dbview import snapshot
from tests.e2e.procs import SiftProcs, http

LIVE = ("queued", "running")


# -- config and callers -----------------------------------------------------------------------


def configure(procs: SiftProcs, **blocks: dict[str, Any]) -> None:
    """Merge `blocks` into the config file of a pair that has not started yet."""
    harness.update_config(procs.config_path, **blocks)


def add_callers(procs: SiftProcs, names: list[str]) -> None:
    """New fleet keys (before the API starts): `procs.call(…, who=name)` works for each."""
    keys_file = procs.state_dir / "keys.toml"
    for name in names:
        procs.keys[name] = add_key(keys_file, name)


# -- the database, read from the test ---------------------------------------------------------


def open_readonly(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.setbusytimeout(5000)
    return conn


@dataclass(frozen=True)
class JobRow:
    id: str
    caller: str
    status: str
    error: str
    targets_total: int
    targets_done: int
    nbytes: int
    lease: float


def read_jobs(conn: apsw.Connection) -> dict[str, JobRow]:
    """Every job row, from one snapshot."""
    with snapshot(conn) as cur:
        return {
            r[0]: JobRow(*r)
            for r in cur.execute(
                "select id, caller, status, error, targets_total, targets_done, nbytes, "
                "lease from batch_job"
            )
        }


def consistency_problems(conn: apsw.Connection) -> list[str]:
    """What is half-written or miscounted in the batch tables (empty when all is well).

    Every job has exactly its targets 0..n-1; `targets_done` is its number of finished
    targets; `nbytes` is the byte length of its stored results; no target outlives its job;
    a finished target has a result (done) or an error (failed), a pending one neither.
    """
    problems = []
    with snapshot(conn) as cur:
        rows = cur.execute(
            "select j.id, j.status, j.targets_total, j.targets_done, j.nbytes, "
            "count(t.idx), coalesce(min(t.idx), 0), coalesce(max(t.idx), -1), "
            "coalesce(sum(t.status in ('done', 'failed')), 0), "
            "coalesce(sum(length(cast(t.result as blob))), 0) "
            "from batch_job j left join batch_target t on t.job_id = j.id group by j.id"
        ).fetchall()
        for jid, status, total, done, nbytes, n, lo, hi, finished, rbytes in rows:
            if (n, lo, hi) != (total, 0, total - 1):
                problems.append(f"job {jid}: {n} targets idx {lo}..{hi}, expected {total}")
            if done != finished:
                problems.append(f"job {jid}: targets_done {done} but {finished} finished")
            if nbytes != rbytes:
                problems.append(f"job {jid}: nbytes {nbytes} but results hold {rbytes}")
            if status in ("done", "partial") and finished != total:
                problems.append(f"job {jid}: {status} with {finished}/{total} finished")
        orphans = cur.execute(
            "select count(*) from batch_target where job_id not in (select id from batch_job)"
        ).fetchone()[0]
        if orphans:
            problems.append(f"{orphans} targets without a job")
        bad = cur.execute(
            "select job_id, idx, status from batch_target where "
            "(status = 'done' and result is null) or (status = 'failed' and error is null) "
            "or (status in ('pending', 'running') and (result is not null or error is not null))"
        ).fetchall()
        problems += [f"target {j}/{i}: {s} with the wrong fields" for j, i, s in bad]
    return problems


# -- a separate process holding the write lock ------------------------------------------------

_HOLDER = r"""
import json, sys, time
import apsw
path, hold = sys.argv[1], float(sys.argv[2])
conn = apsw.Connection(path)
conn.setbusytimeout(30000)
cur = conn.cursor()
cur.execute("begin immediate")
print(json.dumps({"locked": time.monotonic()}), flush=True)
time.sleep(hold)
cur.execute("rollback")
print(json.dumps({"released": time.monotonic()}), flush=True)
conn.close()
"""


class LockHolder:
    """`BEGIN IMMEDIATE` on the database in another process for `hold` seconds, then rollback.

    `locked_at` and `released_at` are `time.monotonic()` readings taken by the holder (the
    clock is system-wide, so they compare with this process's readings).
    """

    def __init__(self, db_path: Path, hold: float):
        self.popen = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(db_path), str(hold)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.locked_at = self._read("locked", timeout=hold + 20)
        self.released_at: float | None = None

    def _read(self, what: str, timeout: float) -> float:
        line = _readline(self.popen, timeout)
        if not line:
            self.popen.kill()
            raise RuntimeError(f"lock holder: no {what!r} line; stderr: {self.popen.stderr.read()}")
        return json.loads(line)[what]

    def wait_released(self, timeout: float = 30.0) -> float:
        self.released_at = self._read("released", timeout)
        self.popen.wait(timeout)
        return self.released_at

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)


def _readline(popen: subprocess.Popen, timeout: float) -> str:
    """One stdout line, or "" if none comes within `timeout` (the reader is a thread)."""
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(popen.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return out[0] if out else ""


# -- many callers at the same moment ----------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    sent_at: float  # time.monotonic() just before the request
    answered_at: float


def at_once(calls: list[Callable[[], tuple[int, Any]]], timeout: float = 60.0) -> list[Answer]:
    """Run every call in its own thread, all released by one barrier; answers in call order."""
    barrier = threading.Barrier(len(calls))
    answers: list[Answer | BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            barrier.wait(timeout)
            sent = time.monotonic()
            status, body = calls[i]()
            answers[i] = Answer(status, body, sent, time.monotonic())
        except BaseException as e:  # reported below, in the test's thread
            answers[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    for i, a in enumerate(answers):
        if isinstance(a, BaseException):
            raise RuntimeError(f"call {i} raised {a!r}") from a
        if a is None:
            raise TimeoutError(f"call {i} did not answer within {timeout} s")
    return answers  # type: ignore[return-value]


def submit_call(procs: SiftProcs, urls: list[str], who: str, timeout: float = 30.0):
    """A zero-argument submit for `at_once`."""
    body = {"targets": [{"url": u} for u in urls]}
    key = procs.keys[who]
    return lambda: http("POST", procs.base + "/v1/batch", body, key=key, timeout=timeout)


# -- product processes against a broken state dir ---------------------------------------------

ROLES = {"sift serve": "api", "sift-worker": "worker"}


def write_config(path: Path, state_dir: Path, port: int) -> Path:
    return harness.write_config(path, state_dir=state_dir, port=port, log={"format": "json"})


def start_and_wait(
    command: str, config: Path, *, wrap: list[str] | None = None, timeout: float = 30.0
) -> subprocess.CompletedProcess:
    """Run a product process to its exit (killed by PID after `timeout`, which fails)."""
    popen = harness.spawn(
        ROLES[command], config, wrap=wrap or (), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = (b.decode() for b in popen.communicate(timeout=timeout))
    except subprocess.TimeoutExpired:
        popen.kill()
        out, err = (b.decode() for b in popen.communicate())
        raise AssertionError(f"{command} still running after {timeout} s: {err[-2000:]}") from None
    return subprocess.CompletedProcess(popen.args, popen.returncode, out, err)


READONLY_MOUNT_FAILED = 97  # exit code of the wrapper when it could not mount


def readonly_wrapper(state_dir: Path) -> list[str]:
    """argv prefix: a private mount namespace where `state_dir` is bind-mounted read-only.

    The mount lives and dies with the wrapped process; the host's mounts are untouched.
    """
    script = (
        'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" '
        f'|| exit {READONLY_MOUNT_FAILED}; exec "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(state_dir)]


def readonly_mount_unavailable(probe_dir: Path) -> str | None:
    """Why a read-only bind mount cannot be made here (None when it works)."""
    if os.geteuid() != 0:
        return "a read-only mount needs root (unshare --mount)"
    for tool in ("unshare", "mount", "sh"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe_dir.mkdir(parents=True, exist_ok=True)
    check = ["sh", "-c", 'touch "$0/probe" 2>/dev/null && exit 1; exit 0', str(probe_dir)]
    try:
        done = subprocess.run(
            [*readonly_wrapper(probe_dir), *check], capture_output=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare failed: {e}"
    if done.returncode == READONLY_MOUNT_FAILED:
        return f"mount in a private namespace refused: {done.stderr.decode().strip()[:200]}"
    if done.returncode != 0:
        return "the read-only bind mount did not stop a write"
    return None


# -- watching the batch tables while the worker drains ----------------------------------------


@dataclass
class Sample:
    at: float  # time.monotonic()
    jobs: dict[str, JobRow]

    @property
    def nbytes(self) -> int:
        return sum(j.nbytes for j in self.jobs.values())


class Sampler:
    """A thread that reads the batch tables every time another connection commits.

    `pragma data_version` changes when any other connection commits, so polling it is cheap
    and every sample is one committed state of the database.
    """

    def __init__(self, db_path: Path, *, limit: float = 120.0, tick: float = 0.001):
        self.conn = open_readonly(db_path)
        self.samples: list[Sample] = []
        self._limit = limit
        self._tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="db-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        deadline = time.monotonic() + self._limit
        version = None
        while not self._stop.is_set() and time.monotonic() < deadline:
            now_version = self.conn.cursor().execute("pragma data_version").fetchone()[0]
            if now_version != version:
                version = now_version
                self.samples.append(Sample(time.monotonic(), read_jobs(self.conn)))
            time.sleep(self._tick)


def proc_memory(pid: int, field: str = "VmRSS") -> int:
    """Bytes of a process's `/proc/PID/status` memory field (VmRSS now, VmHWM its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for process {pid}")
