"""Real processes for the end-to-end tests: the API, the worker, and the loopback test site.

`SiftProcs` writes a config and a keys file into a short temporary state dir, starts
`python -m sift serve` and `python -m worker.main` as subprocesses, and waits until /healthz
says the worker is alive. Every process is stopped or killed by the PID it was started with,
and each one's stderr goes to its own file so tests can read the JSON log lines afterwards.

`serve_site()` runs `tests.site.make_site()` on 127.0.0.1 in a thread with its own event loop,
plus a listener on 127.0.0.2 (not allowed by the guard) that records every connection it
accepts: the site's `/to-blocked` page redirects there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from sift.auth import add_key
from sift.status import TERMINAL
from tests import harness
from tests.site import HIT_AT, HITS, ROBOTS, make_site

ROOT = harness.ROOT
START_TIMEOUT = 20.0  # seconds a process may take to come up (imports on a slow runner)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def short_tmp() -> Path:
    """A state dir whose `worker.sock` path stays far below the ~107-byte socket limit."""
    return Path(tempfile.mkdtemp(prefix="sift-", dir="/tmp"))


# -- the test site ----------------------------------------------------------------------------


@dataclass
class Site:
    port: int
    blocked_port: int
    hits: list[str]  # path and query of every request the site received
    accepted: list[int]  # connections accepted on 127.0.0.2 (must stay empty)
    hit_at: list[tuple[float, str]]  # (time.monotonic(), path and query) of every request
    _loop: asyncio.AbstractEventLoop = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _stop: Any = field(repr=False)
    _release: Any = field(repr=False)
    robots: dict = field(default_factory=dict)  # what /robots.txt answers (tests.site.ROBOTS)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def base(self) -> str:
        return f"http://{self.host}"

    def url(self, path: str) -> str:
        return self.base + path

    def held(self, name: str) -> str:
        """A page that answers only after `release(name)`."""
        return self.url(f"/held/{name}")

    def release(self, name: str) -> None:
        self._loop.call_soon_threadsafe(self._release, name)

    def close(self) -> None:
        fut = asyncio.run_coroutine_threadsafe(self._stop(), self._loop)
        with contextlib.suppress(Exception):
            fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def serve_site(*, delay: float = 0.0) -> Site:
    """Start the test site (127.0.0.1) and the blocked listener (127.0.0.2) in a thread."""
    loop = asyncio.new_event_loop()
    ready: dict[str, Any] = {}
    started = threading.Event()

    async def start() -> None:
        accepted: list[int] = []

        async def on_conn(reader, writer):
            accepted.append(1)
            writer.close()

        blocked = await asyncio.start_server(on_conn, "127.0.0.2", 0)
        blocked_port = blocked.sockets[0].getsockname()[1]
        app = make_site(delay=delay, blocked_port=blocked_port)
        holds: dict[str, asyncio.Event] = {}

        async def held(request):
            # Answers only once the test releases it (or after a minute): a fetch that stays
            # in flight exactly as long as a test needs, whatever the machine's speed.
            event = holds.setdefault(request.match_info["name"], asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), 60)
            return web.Response(text="released", content_type="text/plain")

        app.router.add_get("/held/{name}", held)
        # Slow pages end when their client goes away (a killed worker), and closing the site
        # does not wait for them.
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1)
        await runner.setup()
        tcp = web.TCPSite(runner, "127.0.0.1", 0)
        await tcp.start()
        port = tcp._server.sockets[0].getsockname()[1]

        async def stop() -> None:
            blocked.close()
            await blocked.wait_closed()
            await runner.cleanup()

        def release(name: str) -> None:
            holds.setdefault(name, asyncio.Event()).set()

        ready.update(
            port=port,
            blocked_port=blocked_port,
            hits=app[HITS],
            accepted=accepted,
            hit_at=app[HIT_AT],
            robots=app[ROBOTS],
            stop=stop,
            release=release,
        )

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start())
        except BaseException as e:  # report it to the starting thread
            ready["error"] = e
            started.set()
            return
        started.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="test-site", daemon=True)
    thread.start()
    started.wait(10)
    if "error" in ready or "port" not in ready:
        raise RuntimeError(f"test site did not start: {ready.get('error')!r}")
    return Site(
        ready["port"],
        ready["blocked_port"],
        ready["hits"],
        ready["accepted"],
        ready["hit_at"],
        loop,
        thread,
        ready["stop"],
        ready["release"],
        ready["robots"],
    )


# -- HTTP to the API --------------------------------------------------------------------------

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(
    method: str,
    url: str,
    body: Any = None,
    *,
    key: str | None = None,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """(status, parsed JSON or text) for one request; HTTP errors are answers, not raises."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, raw, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    if "json" in ctype:
        return status, json.loads(raw)
    return status, raw.decode()


# -- the processes ----------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)

    def kill(self) -> None:
        """SIGKILL by PID, and reap."""
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM by PID; SIGKILL if it does not exit within `timeout`. Returns the exit code."""
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def json_lines(self, since: int = 0) -> list[dict]:
        """The JSON log lines written after byte offset `since` (other lines skipped)."""
        out = []
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                text = f.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return out
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out


KEYS = {"alice": False, "bob": False, "spy": True}  # name -> restricted


class SiftProcs:
    """An API and a worker process on one fresh state dir; always `close()` (or use `with`)."""

    def __init__(
        self,
        ports: Iterable[int],
        *,
        batch: dict[str, Any] | None = None,
        fetch: dict[str, Any] | None = None,
        store: dict[str, Any] | None = None,
        keys_from: SiftProcs | None = None,
        gates: dict[str, Any] | None = None,
    ):
        """`store` adds `[store]` settings (engine postgres: another box on that database);
        `keys_from` shares another box's keys file, as boxes behind one load balancer do."""
        self.state_dir = short_tmp()
        self.shared_db = (store or {}).get("engine") == "postgres"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs: list[Proc] = []
        self.api: Proc | None = None
        self.worker: Proc | None = None
        self._serial = 0
        batch_cfg = {"poll_interval": "0.5s", "retry_wait": "0.2s", "grace": "2s"}
        batch_cfg.update(batch or {})
        fetch_cfg = {"timeout": "10s"}
        fetch_cfg.update(fetch or {})
        self.config_path = harness.write_config(
            self.state_dir / "sift.toml",
            state_dir=self.state_dir,
            port=self.port,
            site_ports=sorted(set(ports)),
            fetch=fetch_cfg,
            batch=batch_cfg,
            log={"format": "json", "level": "info"},
            store=store or {},
            # Helpers here poll at up to 50 Hz, past the per-key request rate; its own tests
            # set it (docs/GATES.md §Request rate per key).
            gates={"requests_per_second": 0, **(gates or {})},
        )
        keys_file = self.state_dir / "keys.toml"
        if keys_from is not None:
            shutil.copy(keys_from.state_dir / "keys.toml", keys_file)
            self.keys = dict(keys_from.keys)
        else:
            self.keys = {n: add_key(keys_file, n, restricted=r) for n, r in KEYS.items()}

    # -- lifecycle ----------------------------------------------------------------------------

    def _spawn(self, role: str) -> Proc:
        self._serial += 1
        log_path = self.state_dir / f"{role}.{self._serial}.log"
        with open(log_path, "wb") as log:
            popen = harness.spawn(role, self.config_path, stdout=log)
        proc = Proc(role, popen, log_path)
        self.procs.append(proc)
        return proc

    def start_api(self) -> Proc:
        self.api = self._spawn("api")
        self._wait(lambda: self.health() is not None, self.api, "API /healthz")
        return self.api

    def start_worker(self, *, wait: bool = True) -> Proc:
        """Start a worker; with `wait`, until /healthz shows this PID alive (it is active)."""
        proc = self._spawn("worker")
        if wait:
            self.wait_worker_active(proc)
        self.worker = proc if wait else self.worker
        return proc

    def start(self) -> SiftProcs:
        try:
            self.start_api()
            self.start_worker()
        except BaseException:
            self.close()
            raise
        return self

    def wait_worker_active(self, proc: Proc, timeout: float = START_TIMEOUT) -> None:
        def active() -> bool:
            h = self.health()
            if not (h and h["worker"].get("alive")):
                return False
            if h["worker"].get("pid") == proc.pid:
                return True
            # Boxes on one database: `/healthz` names the newest heartbeat's worker from a read
            # made once a second, which may never catch this one (docs/OPERATIONS.md §Health);
            # its own log says when it took up the drain.
            return self.shared_db and "worker active" in proc.log_text()

        self._wait(active, proc, f"worker {proc.pid} active", timeout)
        self.worker = proc

    def restart_api(self) -> Proc:
        assert self.api is not None
        self.api.stop()
        return self.start_api()

    def restart_worker(self) -> Proc:
        assert self.worker is not None
        self.worker.stop()
        return self.start_worker()

    def _wait(self, ok, proc: Proc, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not proc.alive():
                raise RuntimeError(
                    f"{proc.name} exited ({proc.popen.returncode}) before {what}:"
                    f"\n{proc.log_text()[-3000:]}"
                )
            with contextlib.suppress(OSError):
                if ok():
                    return
            time.sleep(0.05)
        raise TimeoutError(f"{what} not reached in {timeout} s:\n{proc.log_text()[-3000:]}")

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.alive():
                proc.stop(timeout=5)
        if os.environ.get("SIFT_E2E_KEEP"):  # keep the logs and database for a post-mortem
            print(f"e2e state dir kept: {self.state_dir}", file=sys.stderr)
            return
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self) -> SiftProcs:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- talking to the API -------------------------------------------------------------------

    def health(self) -> dict | None:
        try:
            status, body = http("GET", self.base + "/healthz", timeout=2)
        except OSError:
            return None
        return body if status == 200 else None

    def call(
        self, method: str, path: str, body: Any = None, *, who: str = "alice", timeout=30.0
    ) -> tuple[int, Any]:
        return http(method, self.base + path, body, key=self.keys[who], timeout=timeout)

    def submit(self, urls_or_targets: list, *, who: str = "alice") -> tuple[int, Any]:
        targets = [{"url": t} if isinstance(t, str) else t for t in urls_or_targets]
        return self.call("POST", "/v1/batch", {"targets": targets}, who=who)

    def job(self, job_id: str, *, who: str = "alice", query: str = "") -> dict:
        status, body = self.call("GET", f"/v1/batch/{job_id}{query}", who=who)
        assert status == 200, (status, body)
        return body

    def metrics_text(self) -> str:
        status, text = http("GET", self.base + "/metrics")
        assert status == 200
        return text

    def log_mark(self) -> dict[Path, int]:
        """Where each process's log ends now: pass it to `log_lines(since=…)`."""
        return {p.log_path: p.log_size() for p in self.procs}

    def log_lines(self, since: dict[Path, int] | None = None) -> list[dict]:
        """The JSON log lines of every process this object started (after a mark)."""
        since = since or {}
        return [line for p in self.procs for line in p.json_lines(since.get(p.log_path, 0))]


def cli_env(procs: SiftProcs, who: str = "alice") -> dict[str, str]:
    """The environment of a `sift` client command talking to `procs` as `who`."""
    env = dict(os.environ, SIFT_URL=procs.base, SIFT_KEY=procs.keys[who], PYTHONPATH=str(ROOT))
    env.pop("SIFT_CONFIG", None)
    return env


def cli(procs: SiftProcs, *args: str, stdin: str | None = None, who: str = "alice", timeout=60):
    """Run `python -m sift ARGS` to the end against `procs`."""
    return subprocess.run(
        [sys.executable, "-m", "sift", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=cli_env(procs, who),
        cwd=ROOT,
        timeout=timeout,
    )


def cli_popen(procs: SiftProcs, *args: str, who: str = "alice", **kw) -> subprocess.Popen:
    """Start `python -m sift ARGS` against `procs`; stdout and stderr are pipes (text)."""
    return subprocess.Popen(
        [sys.executable, "-m", "sift", *args],
        stdin=subprocess.DEVNULL,
        stdout=kw.pop("stdout", subprocess.PIPE),
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(procs, who),
        cwd=ROOT,
        **kw,
    )


def wait_for_job_status(
    procs: SiftProcs,
    job_id: str,
    statuses: Iterable[str] = TERMINAL,
    *,
    who: str = "alice",
    timeout: float = 30.0,
) -> dict:
    """Poll (with short long-polls) until the job's status is one of `statuses`."""
    wanted = set(statuses)
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = procs.job(job_id, who=who, query="?wait=1" if wanted <= set(TERMINAL) else "")
        if body["status"] in wanted:
            return body
        if not wanted <= set(TERMINAL):
            time.sleep(0.05)
    raise TimeoutError(f"job {job_id} not in {sorted(wanted)} after {timeout} s: {body}")


def wait_until(ok, *, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.02)
    raise TimeoutError(f"{what} not reached in {timeout} s")
