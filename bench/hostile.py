"""Hostile load: a well-behaved caller's service while two others attack, against the same
without the attack, measured in the same run (docs/SECURITY.md §Limits and isolation,
§Bounds on upstream bytes: render isolation).

The attackers send, over and over: a PDF whose stream inflates to 100 MiB, a 2.3 MiB page of
empty paragraphs, JSON nested 5000 deep (with a jq program), a heavy grep over a 9.5 MiB page,
the 13.8 KB table of cells spanning 65,534 rows (a minute of CPU if rendered in-process), a
page with a 9 MB `<link rel=canonical>`, a page full of terminal control sequences, bombs
inside batch jobs (so the worker meets them too), first fetches of 64 origins that each serve
500 KiB of wildcard robots.txt rules (`robots = "always"`, so the API parses them too), a
redirect from the well-behaved caller's host to a host answering 429 with a 300 s
Retry-After, slow fetches to hosts named to share the well-behaved caller's host's gate slots
under the old unkeyed bucket hash, 100 connections that send half a request head, and
long-polls whose replies are never read: on a job of big pages and on a job of the canonical
pages. Measured for the good caller: `/v1/fetch` p50 over article pages and the submit→done
time of a 32-page batch, the median of `--drains` of them in each phase (a single drain of
0.2 s moved by a factor of two from run to run with the machine's load); throughout,
`/healthz` latency and the API's and the worker's PSS, each with its children (render
children, jq children, the fork server). An attacker refused
by the per-key request rate waits as told and asks again (so it spends its rate on work); the
good job's longest stop between two target starts and the attackers' request rate are shown.

Goals: each ratio attack / quiet < 1.3; `/healthz` p99 < 100 ms; API and worker PSS each
< 300 MiB; no process restarted; no job failed by `restart`; none of the good caller's
fetches or targets failed.

    .venv/bin/python bench/hostile.py [--fetches 40] [--targets 32] [--drains 3] [--drain-tasks 1]
        [--hold 30]
        [--attacks bombs,batch,heads,polls,canonical,robots,redirect,collide]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import multiprocessing
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import Sift, Site, median, pct, rss_mb, show
from bench.drain import JobWatch
from tests.bombs import HEAVY_GREP

ATTACKERS = ("evil1", "evil2")
# The attackers' own site: a host's per-host slots are that host's protection, shared by every
# caller (docs/SECURITY.md §The drain between callers), so the attack aims at a host of its own.
BOMB_HOST = "127.0.0.2"
GOOD_HOST = "127.0.0.1"
# 64 origins serving the wildcard-heavy robots.txt (every address but the good caller's does).
ROBOTS_HOSTS = [f"127.0.0.{h}" for h in range(3, 67)]
# The host that answers 429 with Retry-After: 300 at the end of a redirect from GOOD_HOST. Not
# BOMB_HOST, whose hold would only slow the attackers' own bombs.
HOLD_HOST = "127.0.0.67"
# The attackers' batch jobs each on a host of its own (bombs, big pages, canonical pages): on
# BOMB_HOST the interactive bombs hold the slots and batch work, which leaves a host's last
# slot to interactive fetches, would wait there, never reaching the drain.
BATCH_HOSTS = {"bombs": "127.0.0.68", "big": "127.0.0.69", "canonical": "127.0.0.70"}
NETWORK = "127.0.0.0/23"
# The attacks by family (`--attacks`): all of them by default.
FAMILIES = frozenset(
    ("bombs", "batch", "heads", "polls", "canonical", "robots", "redirect", "collide")
)
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


def interleaved(watch: JobWatch, job_id: str) -> int:
    """Other jobs' targets that started between the first and the last start of `job_id`'s:
    the scheduler's share for the good caller, counted in turns, not seconds (which the
    machine's load moves). Targets refused before any request (robots.txt) count too."""
    first, last = watch.db.execute(
        "select min(started_at), max(started_at) from batch_target where job_id = ?", (job_id,)
    ).fetchone()
    if first is None:
        return 0
    return watch.db.execute(
        "select count(*) from batch_target where job_id != ? and started_at > ? and started_at < ?",
        (job_id, first, last),
    ).fetchone()[0]


def longest_stop(watch: JobWatch, job_id: str) -> float:
    """The longest time between two consecutive starts of `job_id`'s targets (the store's
    `started_at`): a drain task held by another caller's slow target shows as a stop."""
    starts = [
        row[0]
        for row in watch.db.execute(
            "select started_at from batch_target where job_id = ? and started_at is not null "
            "order by started_at",
            (job_id,),
        )
    ]
    return max((b - a for a, b in itertools.pairwise(starts)), default=0.0)


def refused(sift: Sift) -> int:
    """Requests the API refused for the per-key request rate (docs/GATES.md §Request rate per
    key), from its own counter; 0 where there is no such counter."""
    with urllib.request.urlopen(sift.url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith('sift_requests_refused_total{outcome="rate_limited"}'):
            return int(float(line.split()[-1]))
    return 0


def old_bucket(host: str, buckets: int = 64) -> int:
    """A host's gate bucket before the hash was keyed: public, so names could be chosen."""
    digest = hashlib.blake2b(host.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % buckets


def colliders(victim: str, n: int = 3) -> list[str]:
    """Loopback addresses outside the other roles' that shared `victim`'s old bucket."""
    taken = {GOOD_HOST, BOMB_HOST, HOLD_HOST, *ROBOTS_HOSTS, *BATCH_HOSTS.values()}
    found = [
        a
        for a in (f"127.0.{x}.{y}" for x in (0, 1) for y in range(1, 255))
        if a not in taken and old_bucket(a) == old_bucket(victim)
    ]
    return found[:n]


def good_fetches(sift: Sift, site: Site, n: int, tag: str, failed: list) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        status, body = call(sift, sift.key, "POST", "/v1/fetch", {"url": site.url(i, tag)})
        out.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            failed.append((status, str(body)[:200]))
    return out


def upstream_alone(site: Site, n: int, tag: str) -> list[float]:
    """The same pages read straight from their server, without Sift: what the machine's load
    alone does to one page's answer (the control for the fetch ratio)."""
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        with _OPENER.open(site.url(i, tag), timeout=30) as resp:
            resp.read()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _drains(drains: list[tuple[float, str, str]]) -> str:
    """Each drain's seconds, and its jobs' statuses where any did not end `done`."""
    times = ", ".join(f"{t:.2f}" for t, _, _ in drains)
    statuses = sorted({status for _, status, _ in drains})
    return f"{times} s ({', '.join(statuses)})"


def good_drain(
    sift: Sift, site: Site, watch: JobWatch, n: int, tag: str, failed: list
) -> tuple[float, str, str]:
    urls = [{"url": site.url(i, tag)} for i in range(n)]
    t0 = time.perf_counter()
    status, body = call(sift, sift.key, "POST", "/v1/batch", {"targets": urls})
    assert status == 202, body
    end = watch.wait_terminal(body["job_id"])
    row = watch.db.execute(
        "select status, coalesce(error, '') from batch_job where id = ?", (body["job_id"],)
    ).fetchone()
    failed += watch.db.execute(
        "select idx, error from batch_target where job_id = ? and status != 'done'",
        (body["job_id"],),
    ).fetchall()
    return end - t0, f"{row[0]} {row[1]}".strip(), body["job_id"]


class Attack:
    """Both attackers' threads; `stop()` ends them and reports what they saw."""

    def __init__(self, sift: Sift, site: Site, families: frozenset[str] = FAMILIES):
        self.sift, self.site, self.families = sift, site, families
        self.stopping = threading.Event()
        self.answers: dict[int, int] = {}
        self.rate_refused = 0  # refusals by the request rate, waited out
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def _count(self, status: int) -> None:
        with self.lock:
            self.answers[status] = self.answers.get(status, 0) + 1

    def _call(self, key: str, method: str, path: str, body=None):
        """A request that waits out a refusal by the per-key request rate as told and asks
        again (docs/GATES.md §Request rate per key): the attacker spends its rate on work
        that costs the service, not on refusals that cost it a few µs."""
        while True:
            status, answer = call(self.sift, key, method, path, body)
            if status != 429 or "request rate" not in str(answer.get("error", "")):
                return status, answer
            with self.lock:
                self.rate_refused += 1
            if self.stopping.wait(1.0):  # Retry-After: 1 at whole-number rates
                return status, answer

    def at(self, host: str, path: str) -> str:
        return f"http://{host}:{self.site.port}{path}"

    def start(self, collide: list[str]) -> Attack:
        base = self.at(BOMB_HOST, "/hostile/")
        bombs = [
            {"url": base + "pdf"},
            {"url": base + "html"},
            {"url": base + "deep.json", "jq": "[paths]"},
            {"url": base + "haystack.txt", "grep": HEAVY_GREP},
            {"url": self.at(BOMB_HOST, "/t/hostile/table.html")},
            {"url": base + "canonical"},
            {"url": base + "terminal"},
        ]
        evil1, evil2 = (self.sift.keys[name] for name in ATTACKERS)
        on = self.families.__contains__
        if on("bombs"):
            for key in (evil1, evil2):
                for k in range(2):
                    self._run(self._fetch_loop, key, bombs[k::2] + bombs[1 - k :: 2])
        if on("batch"):
            there = self.at(BATCH_HOSTS["bombs"], "")
            here = self.at(BOMB_HOST, "")
            self._run(
                self._batch_loop, evil2, [dict(b, url=b["url"].replace(here, there)) for b in bombs]
            )
        if on("heads"):
            self._run(self._slow_heads, 100)
        if on("polls"):
            big = [{"url": self.at(BATCH_HOSTS["big"], f"/big/{i}")} for i in range(32)]
            self._run(self._held_polls, evil1, big, 50)
        if on("canonical"):
            canonical = [
                {"url": self.at(BATCH_HOSTS["canonical"], f"/hostile/canonical?n={i}")}
                for i in range(8)
            ]
            self._run(self._held_polls, evil2, canonical, 20)
        if on("robots"):
            self._run(self._robots_fetches, evil1)
            self._run(self._robots_batches, evil2)
        if on("redirect"):
            self._run(self._redirect_to_hold, evil1)
        if on("collide"):
            for i, key in enumerate((evil1, evil2)):
                self._run(self._slow_colliders, key, collide[i::2])
        return self

    def _run(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def _fetch_loop(self, key: str, targets: list[dict]) -> None:
        i = 0
        while not self.stopping.is_set():
            status, _ = self._call(key, "POST", "/v1/fetch", targets[i % len(targets)])
            self._count(status)
            i += 1

    def _batch_loop(self, key: str, targets: list[dict]) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1  # a new list each time, so no submit is an idempotent reuse
            fresh = [dict(t, url=f"{t['url']}?r={n}-{i}") for i, t in enumerate(targets * 2)]
            status, body = self._call(key, "POST", "/v1/batch", {"targets": fresh})
            self._count(status)
            if status == 202:
                self._call(key, "GET", f"/v1/batch/{body['job_id']}?wait=60&results=false")
            else:
                time.sleep(0.5)

    def _robots_fetches(self, key: str) -> None:
        """First fetches of the robots origins, round and round: each is a parse in the API."""
        i = 0
        while not self.stopping.is_set():
            host = ROBOTS_HOSTS[i % len(ROBOTS_HOSTS)]
            status, _ = self._call(key, "POST", "/v1/fetch", {"url": self.at(host, "/a/1")})
            self._count(status)
            i += 1

    def _robots_batches(self, key: str) -> None:
        """Jobs over every robots origin: each origin's robots.txt is a parse in the worker."""
        n = 0
        while not self.stopping.is_set():
            n += 1
            # Two jobs' worth of origins in turn (`[batch] targets_per_job` is 32).
            half = ROBOTS_HOSTS[: len(ROBOTS_HOSTS) // 2] if n % 2 else ROBOTS_HOSTS[32:]
            targets = [{"url": self.at(h, f"/a/{n}?r={n}")} for h in half]
            status, body = self._call(key, "POST", "/v1/batch", {"targets": targets})
            self._count(status)
            if status == 202:
                self._call(key, "GET", f"/v1/batch/{body['job_id']}?wait=60&results=false")
            else:
                self.stopping.wait(0.5)

    def _redirect_to_hold(self, key: str) -> None:
        """The good caller's host redirects to a host that answers 429, Retry-After 300: the
        hold must land on the host that answered, not on the one requested."""
        hold = urllib.parse.quote(self.at(HOLD_HOST, "/t/retry-after/429?after=300"))
        n = 0
        while not self.stopping.is_set():
            n += 1
            url = self.at(GOOD_HOST, f"/t/redirect?n={n}&to={hold}")
            status, _ = self._call(key, "POST", "/v1/fetch", {"url": url})
            self._count(status)
            status, _ = self._call(key, "POST", "/v1/batch", {"targets": [{"url": url}]})
            self._count(status)
            self.stopping.wait(2)

    def _slow_colliders(self, key: str, hosts: list[str]) -> None:
        """Slow fetches to hosts that shared the good caller's host's gate bucket under the
        old public hash: there they took its slots; now each host has its own."""
        i = 0
        while not self.stopping.is_set() and hosts:
            host = hosts[i % len(hosts)]
            status, _ = self._call(key, "POST", "/v1/fetch", {"url": self.at(host, f"/a/{i}?s=8")})
            self._count(status)
            i += 1

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

    def _held_polls(self, key: str, targets: list[dict], n: int) -> None:
        """A job of `targets`, then `n` status reads of it whose replies are never read."""
        status, body = self._call(key, "POST", "/v1/batch", {"targets": targets})
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


class AttackProcess:
    """The attack in a process of its own (forked), so the attackers' threads never share a
    GIL with the good caller's requests or the sampling that measure them."""

    def __init__(self, sift: Sift, site: Site, collide: list[str], families: frozenset[str]):
        ctx = multiprocessing.get_context("fork")
        self._stop = ctx.Event()
        self._answers = ctx.Queue()
        self._proc = ctx.Process(
            target=self._run, args=(sift, site, collide, families), daemon=True
        )

    def _run(self, sift: Sift, site: Site, collide: list[str], families: frozenset[str]) -> None:
        attack = Attack(sift, site, families).start(collide)
        self._stop.wait()
        self._answers.put(attack.stop())

    def start(self) -> AttackProcess:
        self._proc.start()
        return self

    def stop(self) -> dict[int, int]:
        self._stop.set()
        answers = self._answers.get(timeout=180)
        self._proc.join(10)
        return answers


def _still_open(s: socket.socket) -> bool:
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def descendants(pid: int) -> list[int]:
    """`pid` and every process under it (render children, the fork server, jq children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{p}/task").iterdir():
                with contextlib.suppress(OSError):
                    todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def pss_tree_mb(pid: int) -> tuple[float, int]:
    """The proportional set size of `pid` and its descendants (pages they share, the fork
    server's copy-on-write ones, counted once in all), and how many processes that is."""
    total = 0
    tree = descendants(pid)
    for p in tree:
        with contextlib.suppress(OSError), open(f"/proc/{p}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
    return total / 1024, len(tree)


class Watch:
    """Sampled throughout a phase: each process's peak PSS with its children and peak RSS of
    its own (every 100 ms), and `/healthz` latency (a request every 50 ms, each on a new
    connection as a load balancer's probe would)."""

    def __init__(self, sift: Sift):
        self.sift = sift
        self.pss = {"api": 0.0, "worker": 0.0}
        self.procs_at_peak = {"api": 0, "worker": 0}
        self.rss = {"api": 0.0, "worker": 0.0}
        self.health: list[float] = []
        self.health_bad: dict[int, int] = {}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._memory, daemon=True),
            threading.Thread(target=self._healthz, daemon=True),
        ]

    def _memory(self) -> None:
        while not self._stop.is_set():
            for name in self.pss:
                pid = self.sift.pid(name)
                with contextlib.suppress(OSError):
                    self.rss[name] = max(self.rss[name], rss_mb(pid))
                    pss, n = pss_tree_mb(pid)
                    if pss > self.pss[name]:
                        self.pss[name], self.procs_at_peak[name] = pss, n
            self._stop.wait(0.1)

    def _healthz(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            try:
                with _OPENER.open(self.sift.url + "/healthz", timeout=30) as resp:
                    resp.read()
                    status = resp.status
            except urllib.error.HTTPError as e:
                status = e.code
            except OSError:
                status = 0
            self.health.append((time.perf_counter() - t0) * 1000)
            if status != 200:
                self.health_bad[status] = self.health_bad.get(status, 0) + 1
            self._stop.wait(0.05)

    def __enter__(self) -> Watch:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(35)

    def healthz(self) -> str:
        bad = f", not 200: {self.health_bad}" if self.health_bad else ""
        return (
            f"p50 {median(self.health):.1f} / p99 {pct(self.health, 99):.1f} / "
            f"max {max(self.health, default=float('nan')):.0f} ms ({len(self.health)}){bad}"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fetches", type=int, default=40)
    ap.add_argument("--targets", type=int, default=32)
    ap.add_argument(
        "--drains", type=int, default=3, help="the good caller's drains per phase (median)"
    )
    ap.add_argument("--drain-tasks", type=int, default=1, help="[batch] drain_tasks")
    ap.add_argument(
        "--hold", type=float, default=30.0, help="seconds of attack at least (memory is sampled)"
    )
    ap.add_argument(
        "--attacks",
        default=",".join(sorted(FAMILIES)),
        help="comma-separated attack families (default: all): " + ", ".join(sorted(FAMILIES)),
    )
    args = ap.parse_args()
    families = frozenset(args.attacks.split(","))
    if not families <= FAMILIES:
        ap.error(f"unknown attacks: {', '.join(sorted(families - FAMILIES))}")
    collide = colliders(GOOD_HOST)
    site = Site(pages=64, hosts=70, also=tuple(collide), env={"SIFT_BENCH_ROBOTS": "1"}).start()
    # The good caller's pages come from a server of their own on GOOD_HOST (another port):
    # one process serving the attackers' 9 MB pages too would slow its answers whatever Sift
    # did. The attacks that aim at GOOD_HOST (the redirect, the bucket colliders) still do.
    good = Site(pages=64).start()
    sift = Sift(
        [site.port, good.port],
        networks=NETWORK,
        cache={"ttl": 0},
        batch={"jobs_per_caller": 4, "drain_tasks": args.drain_tasks},
        fetch={"robots": "always"},
        # docs/GATES.md §One caller and the global limit: per_caller × 2 busy callers < global.
        gates={"per_caller": 3, "requests_per_second": 20, "request_burst": 100},
        callers=ATTACKERS,
    ).start()
    try:
        watch = JobWatch(sift)
        pids = {name: sift.pid(name) for name in ("api", "worker")}
        failed: list = []
        good_fetches(sift, good, 4, "warm", failed)  # both processes' render children are up
        good_drain(sift, good, watch, 4, "warmd", failed)
        with Watch(sift) as quiet:
            quiet_fetch = good_fetches(sift, good, args.fetches, "q", failed)
            quiet_alone = upstream_alone(good, args.fetches, "qa")
            quiet_drains = [
                good_drain(sift, good, watch, args.targets, f"qd{d}", failed)
                for d in range(args.drains)
            ]
        load_before = os.getloadavg()
        with Watch(sift) as attacked:
            attack = AttackProcess(sift, site, collide, families).start()
            began = time.monotonic()
            time.sleep(3)  # the attack is under way: bombs in children, sockets held
            hostile_fetch = good_fetches(sift, good, args.fetches, "h", failed)
            hostile_alone = upstream_alone(good, args.fetches, "ha")
            hostile_drains = [
                good_drain(sift, good, watch, args.targets, f"hd{d}", failed)
                for d in range(args.drains)
            ]
            turns = max(interleaved(watch, job) for _, _, job in hostile_drains)
            stop = max(longest_stop(watch, job) for _, _, job in hostile_drains)
            time.sleep(max(0.0, args.hold - (time.monotonic() - began)))  # sustained
            load_during = os.getloadavg()
            answers = attack.stop()
            attack_seconds = time.monotonic() - began
        alive = {n: sift.procs[n].poll() is None and sift.pid(n) == pid for n, pid in pids.items()}
        restarted = watch.db.execute(
            "select count(*) from batch_job where error = 'restart'"
        ).fetchone()[0]
        rate_limited = refused(sift)
        asked = sum(answers.values())
        fetch_ratio = median(hostile_fetch) / median(quiet_fetch)
        quiet_drain = median(t for t, _, _ in quiet_drains)
        hostile_drain = median(t for t, _, _ in hostile_drains)
        drain_ratio = hostile_drain / quiet_drain
        show(
            "well-behaved caller, quiet vs under attack",
            [
                ("/v1/fetch p50 quiet", f"{median(quiet_fetch):.1f} ms"),
                ("/v1/fetch p50 under attack", f"{median(hostile_fetch):.1f} ms"),
                ("ratio (goal < 1.3)", f"{fetch_ratio:.2f}"),
                (
                    "its pages straight from their server, p50 quiet / attack",
                    f"{median(quiet_alone):.1f} / {median(hostile_alone):.1f} ms",
                ),
                (f"drains of {args.targets} pages quiet", _drains(quiet_drains)),
                ("drains under attack", _drains(hostile_drains)),
                ("ratio of the medians (goal < 1.3)", f"{drain_ratio:.2f}"),
                ("attackers' batch targets started during one drain, most", str(turns)),
                ("longest stop between two of its target starts", f"{stop:.2f} s"),
                ("its fetches and targets that failed (goal: none)", str(failed or "none")),
            ],
        )
        show(
            "processes",
            [
                ("/healthz quiet", quiet.healthz()),
                ("/healthz under attack (goal: p99 < 100 ms)", attacked.healthz()),
                (
                    "API PSS with children, quiet / attack (< 300 MiB)",
                    _pair(quiet, attacked, "api"),
                ),
                (
                    "worker PSS with children, quiet / attack (< 300 MiB)",
                    _pair(quiet, attacked, "worker"),
                ),
                ("API / worker RSS of its own, attack", _own(attacked)),
                ("same processes, alive", str(alive)),
                ("jobs failed by restart", str(restarted)),
                ("attackers' answers by status", str(answers)),
                (
                    "attackers' requests a second; refused by the request rate",
                    f"{asked / attack_seconds:.0f}; {rate_limited}",
                ),
                ("hosts that shared the good host's old bucket", ", ".join(collide)),
                (
                    "load average (1 min) before / end of attack",
                    f"{load_before[0]:.1f} / {load_during[0]:.1f}",
                ),
            ],
        )
        print(
            "\nRESULT "
            + json.dumps(
                {
                    "fetch_ratio": round(fetch_ratio, 3),
                    "upstream_ratio": round(median(hostile_alone) / median(quiet_alone), 3),
                    "drain_ratio": round(drain_ratio, 3),
                    "quiet_drain": round(quiet_drain, 3),
                    "hostile_drain": round(hostile_drain, 3),
                    "interleaved": turns,
                    "longest_stop": round(stop, 2),
                    "attack_rps": round(asked / attack_seconds),
                    "rate_limited": rate_limited,
                    "healthz_p99": round(pct(attacked.health, 99), 1),
                    "pss": {k: round(v) for k, v in attacked.pss.items()},
                    "failed": len(failed),
                    "restarted": restarted,
                    "alive": all(alive.values()),
                    "load": round(load_during[0], 1),
                }
            )
        )
    finally:
        sift.stop()
        site.stop()
        good.stop()


def _pair(quiet: Watch, attack: Watch, name: str) -> str:
    return (
        f"{quiet.pss[name]:.0f} / {attack.pss[name]:.0f} MiB "
        f"({quiet.procs_at_peak[name]} / {attack.procs_at_peak[name]} processes at the peak)"
    )


def _own(attack: Watch) -> str:
    return f"{attack.rss['api']:.0f} / {attack.rss['worker']:.0f} MB"


if __name__ == "__main__":
    main()
