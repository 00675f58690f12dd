"""Hostile load: a well-behaved caller's service while two others attack, against the same
without the attack (docs/SECURITY.md §Limits and isolation).

The attackers send, over and over: a PDF whose stream inflates to 100 MiB, a 2.3 MiB page of
empty paragraphs, JSON nested 5000 deep (with a jq program), a heavy grep over a 9.5 MiB page,
bombs inside batch jobs (so the worker meets them too), 100 connections that send half a
request head, and long-polls on a big job whose replies are never read. Measured for the
good caller: `/v1/fetch` p50 over article pages and the submit→done time of a 32-page batch.

Goals: each ratio attack / quiet < 1.5; API RSS < 150 MB and worker RSS < 200 MB throughout
(sampled every 50 ms); no process restarted; no job failed by `restart`.

    .venv/bin/python bench/hostile.py [--fetches 40] [--targets 32] [--drain-tasks 1] [--hold 30]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import Sift, Site, median, rss_mb, show
from bench.drain import JobWatch
from tests.bombs import HEAVY_GREP

ATTACKERS = ("evil1", "evil2")
# The attackers' own site: a host's per-host slots are that host's protection, shared by every
# caller (docs/SECURITY.md §The drain between callers), so the attack aims at a host of its own.
BOMB_HOST = "127.0.0.2"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(sift: Sift, key: str, method: str, path: str, body=None, timeout: float = 120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        sift.url + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
    except (OSError, ValueError) as e:  # refused past the connection cap, reset, timed out
        return 0, {"error": type(e).__name__}


def good_fetches(sift: Sift, site: Site, n: int, tag: str) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        status, body = call(sift, sift.key, "POST", "/v1/fetch", {"url": site.url(i, tag)})
        out.append((time.perf_counter() - t0) * 1000)
        assert status == 200, body
    return out


def good_drain(sift: Sift, site: Site, watch: JobWatch, n: int, tag: str) -> tuple[float, str]:
    urls = [{"url": site.url(i, tag)} for i in range(n)]
    t0 = time.perf_counter()
    status, body = call(sift, sift.key, "POST", "/v1/batch", {"targets": urls})
    assert status == 202, body
    end = watch.wait_terminal(body["job_id"])
    row = watch.db.execute(
        "select status, coalesce(error, '') from batch_job where id = ?", (body["job_id"],)
    ).fetchone()
    return end - t0, f"{row[0]} {row[1]}".strip()


class Attack:
    """Both attackers' threads; `stop()` ends them and reports what they saw."""

    def __init__(self, sift: Sift, site: Site):
        self.sift, self.site = sift, site
        self.stopping = threading.Event()
        self.answers: dict[int, int] = {}
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def _count(self, status: int) -> None:
        with self.lock:
            self.answers[status] = self.answers.get(status, 0) + 1

    def start(self) -> Attack:
        base = f"http://{BOMB_HOST}:{self.site.port}/hostile/"
        bombs = [
            {"url": base + "pdf"},
            {"url": base + "html"},
            {"url": base + "deep.json", "jq": "[paths]"},
            {"url": base + "haystack.txt", "grep": HEAVY_GREP},
        ]
        for name in ATTACKERS:
            key = self.sift.keys[name]
            for k in range(2):
                self._run(self._fetch_loop, key, bombs[k::2] + bombs[2 - k :: 2])
        self._run(self._batch_loop, self.sift.keys["evil2"], bombs)
        self._run(self._slow_heads, 100)
        self._run(self._held_polls, self.sift.keys["evil1"], 50)
        return self

    def _run(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def _fetch_loop(self, key: str, targets: list[dict]) -> None:
        i = 0
        while not self.stopping.is_set():
            status, _ = call(self.sift, key, "POST", "/v1/fetch", targets[i % len(targets)])
            self._count(status)
            i += 1

    def _batch_loop(self, key: str, targets: list[dict]) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1  # a new list each time, so no submit is an idempotent reuse
            fresh = [dict(t, url=f"{t['url']}?r={n}-{i}") for i, t in enumerate(targets * 2)]
            status, body = call(self.sift, key, "POST", "/v1/batch", {"targets": fresh})
            self._count(status)
            if status == 202:
                call(self.sift, key, "GET", f"/v1/batch/{body['job_id']}?wait=60&results=false")
            else:
                time.sleep(0.5)

    def _slow_heads(self, n: int) -> None:
        socks: list[socket.socket] = []
        while not self.stopping.is_set():
            socks = [s for s in socks if _still_open(s)]
            while len(socks) < n:
                with contextlib.suppress(OSError):
                    s = socket.create_connection(("127.0.0.1", self.sift.port), timeout=5)
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    s.setblocking(False)
                    socks.append(s)
            time.sleep(0.2)
        for s in socks:
            s.close()

    def _held_polls(self, key: str, n: int) -> None:
        big = [{"url": f"http://{BOMB_HOST}:{self.site.port}/big/{i}"} for i in range(32)]
        status, body = call(self.sift, key, "POST", "/v1/batch", {"targets": big})
        if status != 202:
            return
        path = f"/v1/batch/{body['job_id']}?wait=60"
        head = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
        socks: list[socket.socket] = []
        while not self.stopping.is_set():
            for s in socks:
                s.close()
            socks = []
            for _ in range(n):
                with contextlib.suppress(OSError):
                    s = socket.create_connection(("127.0.0.1", self.sift.port), timeout=5)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    s.sendall(head)
                    socks.append(s)  # never read
            self.stopping.wait(3)
        for s in socks:
            s.close()

    def stop(self) -> dict[int, int]:
        self.stopping.set()
        for t in self.threads:
            t.join(130)
        return dict(sorted(self.answers.items()))


def _still_open(s: socket.socket) -> bool:
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


class Peaks:
    """Peak RSS of the API and the worker, sampled every 50 ms."""

    def __init__(self, sift: Sift):
        self.sift = sift
        self.peak = {"api": 0.0, "worker": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name in self.peak:
                with contextlib.suppress(OSError):
                    self.peak[name] = max(self.peak[name], rss_mb(self.sift.pid(name)))
            time.sleep(0.05)

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fetches", type=int, default=40)
    ap.add_argument("--targets", type=int, default=32)
    ap.add_argument("--drain-tasks", type=int, default=1, help="[batch] drain_tasks")
    ap.add_argument(
        "--hold", type=float, default=30.0, help="seconds of attack at least (RSS is sampled)"
    )
    args = ap.parse_args()
    site = Site(pages=64, hosts=2).start()
    sift = Sift(
        site.port,
        networks="127.0.0.0/30",
        cache={"ttl": 0},
        batch={"jobs_per_caller": 2, "drain_tasks": args.drain_tasks},
        callers=ATTACKERS,
    ).start()
    try:
        watch = JobWatch(sift)
        pids = {name: sift.pid(name) for name in ("api", "worker")}
        good_fetches(sift, site, 4, "warm")  # both processes' render children are up
        good_drain(sift, site, watch, 4, "warmd")
        with Peaks(sift) as quiet_peaks:
            quiet_fetch = good_fetches(sift, site, args.fetches, "q")
            quiet_drain, quiet_status = good_drain(sift, site, watch, args.targets, "qd")
        attack = Attack(sift, site).start()
        began = time.monotonic()
        time.sleep(3)  # the attack is under way: bombs in children, sockets held
        with Peaks(sift) as attack_peaks:
            hostile_fetch = good_fetches(sift, site, args.fetches, "h")
            hostile_drain, hostile_status = good_drain(sift, site, watch, args.targets, "hd")
            time.sleep(max(0.0, args.hold - (time.monotonic() - began)))  # sustained
        answers = attack.stop()
        alive = {n: sift.procs[n].poll() is None and sift.pid(n) == pid for n, pid in pids.items()}
        restarted = watch.db.execute(
            "select count(*) from batch_job where error = 'restart'"
        ).fetchone()[0]
        fetch_ratio = median(hostile_fetch) / median(quiet_fetch)
        drain_ratio = hostile_drain / quiet_drain
        show(
            "well-behaved caller, quiet vs under attack",
            [
                ("/v1/fetch p50 quiet", f"{median(quiet_fetch):.1f} ms"),
                ("/v1/fetch p50 under attack", f"{median(hostile_fetch):.1f} ms"),
                ("ratio (goal < 1.5)", f"{fetch_ratio:.2f}"),
                (f"drain of {args.targets} pages quiet", f"{quiet_drain:.2f} s ({quiet_status})"),
                ("drain under attack", f"{hostile_drain:.2f} s ({hostile_status})"),
                ("ratio (goal < 1.5)", f"{drain_ratio:.2f}"),
            ],
        )
        show(
            "processes",
            [
                (
                    "API RSS peak quiet / attack (goal < 150 MB)",
                    _pair(quiet_peaks, attack_peaks, "api"),
                ),
                (
                    "worker RSS peak quiet / attack (goal < 200 MB)",
                    _pair(quiet_peaks, attack_peaks, "worker"),
                ),
                ("same processes, alive", str(alive)),
                ("jobs failed by restart", str(restarted)),
                ("attackers' answers by status", str(answers)),
            ],
        )
    finally:
        sift.stop()
        site.stop()


def _pair(quiet: Peaks, attack: Peaks, name: str) -> str:
    return f"{quiet.peak[name]:.0f} / {attack.peak[name]:.0f} MB"


if __name__ == "__main__":
    main()
