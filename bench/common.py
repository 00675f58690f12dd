"""Shared pieces of the benchmarks: a loopback article site, real Sift processes, statistics.

Every benchmark talks only to 127.0.0.1, starts its own processes and stops them by PID.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import aiohttp

from sift.fetch import render
from tests import harness

ROOT = Path(__file__).resolve().parent.parent

_WORDS = [
    "harbour",
    "engineers",
    "council",
    "storm",
    "budget",
    "vessel",
    "tide",
    "survey",
    "contract",
    "season",
    "crew",
    "northern",
    "granite",
    "concrete",
    "barrier",
    "autumn",
    "regional",
    "project",
    "cost",
    "schedule",
    "meeting",
    "residents",
    "report",
    "study",
    "design",
    "harbourmaster",
    "weather",
    "winter",
    "repair",
]


def article(n: int, paragraphs: int = 30, seed: int = 0) -> str:
    """A realistic news page (about 100 KB, like a typical news site's article HTML):
    inline scripts and styles, navigation, cookie banner, article, share bar, comments, footer."""
    rnd = random.Random(n * 7919 + seed)

    def sentence() -> str:
        words = [rnd.choice(_WORDS) for _ in range(rnd.randint(12, 24))]
        return " ".join(words).capitalize() + "."

    body = "\n".join(f"<p>{' '.join(sentence() for _ in range(4))}</p>" for _ in range(paragraphs))
    nav = "".join(f'<li><a href="/section/{i}">Section {i}</a></li>' for i in range(30))
    related = "".join(
        f'<li><a href="/story/{n + i}">Related story {n + i}</a></li>' for i in range(1, 16)
    )
    bundle = "".join(f"function f{i}(a,b){{return a*{i}+b;}}" for i in range(1500))
    styles = "".join(f".c{i}{{margin:{i % 9}px;color:#{i:06x}}}" for i in range(900))
    comments = "".join(
        f'<div class="comment"><b>reader{i}</b><p>{sentence()}</p></div>' for i in range(10)
    )
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Story {n}: harbour works</title>
<meta property="og:title" content="Story {n}: harbour works">
<script>window.analytics = {{"id": {n}}};{bundle}</script><style>{styles}</style></head>
<body><header><ul class="nav">{nav}</ul></header>
<div id="cookie-consent">We use cookies. <button>Accept all</button></div>
<main><article><h1>Story {n}: harbour works</h1><p class="byline">By Staff Reporter</p>
{body}
<h2>Timeline</h2><ul><li>Survey in March</li><li>Tender in April</li><li>Work in May</li></ul>
<table><tr><th>Phase</th><th>Cost</th></tr><tr><td>One</td><td>4m</td></tr></table>
</article>
<div class="share">Share: <a href="#">Facebook</a> <a href="#">X</a></div>
<aside><h3>Related</h3><ul>{related}</ul></aside>
<section id="comments"><h3>Comments</h3>{comments}</section></main>
<footer><p>Copyright Example News</p><a href="/privacy">Privacy</a></footer></body></html>"""


class Site:
    """The article site on 127.0.0.1, in its own process (`bench/site.py`).

    A separate process, so neither the baseline loop nor the benchmark's own polling shares a
    GIL with the server. `first_hit(path)` asks it when a path was first requested, on the
    monotonic clock that `time.perf_counter` reads in every process.
    """

    def __init__(
        self,
        *,
        delay: float = 0.0,
        pages: int = 64,
        host: str = "127.0.0.1",
        hosts: int = 1,
        data: str = "",
        also: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        """`data`: a `.jsonl.gz` of real pages to serve instead of synthetic articles; `also`:
        more loopback addresses it answers on; `env`: its environment's additions (bench/site.py
        says which)."""
        self.data = data
        self.also = also
        self.env = env or {}
        self.delay = delay
        self.pages = pages
        self.host = host
        self.hosts = hosts
        self.port = 0
        self._proc: subprocess.Popen | None = None

    def start(self) -> Site:
        self._proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("site.py")),
                str(self.delay),
                str(self.pages),
                self.host,
                str(self.hosts),
                ",".join(self.also),
                *([self.data] if self.data else []),
            ],
            env={**os.environ, **self.env},
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        self.port = int(self._proc.stdout.readline())
        return self

    def url(self, n: int, tag: str = "", host: int | None = None) -> str:
        """Page n on this site's host, or on 127.0.0.`host` (one server on `hosts` addresses)."""
        where = self.host if host is None else f"127.0.0.{host}"
        return f"http://{where}:{self.port}/a/{n}" + (f"?{tag}" if tag else "")

    def first_hit(self, path_qs: str) -> float:
        query = urllib.parse.urlencode({"path": path_qs})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://{self.host}:{self.port}/_first?{query}", timeout=10) as resp:
            return float(resp.read())

    def log(self) -> list[str]:
        """Every page request's path and query, in the order the site received them."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://{self.host}:{self.port}/_log", timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(10)


def synthetic_pages(n: int) -> list[dict]:
    """The first `n` of the bench site's articles, fetched from it over loopback as the drain
    and fetch benches fetch them: `{"html", "url"}` each."""
    site = Site(pages=n).start()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    pages = []
    try:
        for i in range(n):
            url = site.url(i)
            with opener.open(url, timeout=10) as resp:
                pages.append({"html": resp.read().decode("utf-8"), "url": url})
    finally:
        site.stop()
    return pages


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sift:
    """Real `sift serve` and (optionally) `sift-worker` processes on a temporary state dir."""

    def __init__(
        self,
        site_port: int | list[int],
        *,
        worker: bool = True,
        dsn: str = "",
        workers: int = 1,
        networks: str = "127.0.0.1/32",
        callers: tuple = (),
        wrap: dict[str, list[str]] | None = None,
        **blocks: dict,
    ):
        """`site_port`: the site's port, or several sites' (give their `guard` block too when
        they are not all on 127.0.0.1); `dsn` selects the postgres engine on that database;
        `workers` worker processes; `networks` the loopback addresses the site answers on;
        `callers` more keys by name; `wrap` a command prefix per role (a profiler)."""
        self.wrap = wrap or {}
        self.dir = Path(tempfile.mkdtemp(prefix="sb-", dir="/tmp"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dsn = dsn
        (self.dir / "state").mkdir()
        blocks["log"] = {"level": "warning", "format": "json", **blocks.get("log", {})}
        # Throughput benches measure Sift's work, not the per-key request rate (docs/GATES.md
        # §Request rate per key); the hostile bench keeps it on.
        blocks["gates"] = {"requests_per_second": 0, **blocks.get("gates", {})}
        if dsn:
            blocks["store"] = {"engine": "postgres", "dsn": dsn, **blocks.get("store", {})}
        blocks["guard"] = {"allow_networks": [networks], **blocks.get("guard", {})}
        self.config = str(
            harness.write_config(
                self.dir / "sift.toml",
                state_dir=self.dir / "state",
                port=self.port,
                site_ports=site_port if isinstance(site_port, list) else [site_port],
                **blocks,
            )
        )
        self.worker = worker
        self.workers = workers if worker else 0
        self.procs: dict[str, subprocess.Popen] = {}
        self.key = ""
        self.callers = callers
        self.keys: dict[str, str] = {}

    def _spawn(self, role: str, name: str | None = None) -> None:
        name = name or role
        log = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        wrap = [w.replace("{name}", name) for w in self.wrap.get(role, ())]
        self.procs[name] = harness.spawn(role, Path(self.config), stdout=log, stderr=log, wrap=wrap)

    def add_key(self, name: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "sift", "keys", "add", name, "--config", self.config],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def start(self) -> Sift:
        self.key = self.add_key("bench")
        for name in self.callers:
            self.keys[name] = self.add_key(name)
        self._spawn("api")
        for i in range(self.workers):
            self._spawn("worker", "worker" if i == 0 else f"worker{i + 1}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                health = self.get("/healthz", auth=False)
                if not self.worker or health["worker"]["alive"]:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop(keep=True)
        raise RuntimeError(f"sift did not start; see {self.dir}")

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def request(
        self, method: str, path: str, body=None, *, auth: bool = True, key: str | None = None
    ):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {key or self.key}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=120) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read() or b"{}")

    def get(self, path: str, *, auth: bool = True):
        return self.request("GET", path, auth=auth)

    def stop(self, *, keep: bool = False) -> None:
        """Stop the processes and delete the state dir unless `keep` (a failed start) or
        `SIFT_BENCH_KEEP=1` (to look into a run's logs and database)."""
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if not (keep or os.environ.get("SIFT_BENCH_KEEP")):
            shutil.rmtree(self.dir, ignore_errors=True)


class JobWatch:
    """When a job became terminal, measured without adding load of its own: SQLite is read
    (read-only) at 1 ms intervals; PostgreSQL is not polled (a server process would compete
    for the cores) but listened to: the store's own `sift_jobs` notification names the job."""

    def __init__(self, sift: Sift):
        self.dsn = sift.dsn
        if sift.dsn:
            import psycopg

            self.conn = psycopg.connect(sift.dsn, autocommit=True)
            self.conn.execute("listen sift_jobs")
            self.ended: dict[str, float] = {}
        else:
            import apsw

            self.db = apsw.Connection(
                str(sift.dir / "state" / "sift.db"), flags=apsw.SQLITE_OPEN_READONLY
            )

    def status(self, job_id: str) -> str | None:
        if self.dsn:
            row = self.conn.execute(
                "select status from batch_job where id = %s", (job_id,)
            ).fetchone()
        else:
            row = self.db.execute("select status from batch_job where id = ?", (job_id,)).fetchone()
        return row[0] if row else None

    def wait_terminal(self, job_id: str, timeout: float = 300) -> float:
        terminal = ("done", "partial", "failed", "cancelled")
        deadline = time.perf_counter() + timeout
        if self.dsn:
            if self.status(job_id) in terminal and job_id not in self.ended:
                return time.perf_counter()
            while job_id not in self.ended and time.perf_counter() < deadline:
                for note in self.conn.notifies(timeout=1.0, stop_after=1):
                    self.ended.setdefault(note.payload, time.perf_counter())
            if job_id in self.ended:
                return self.ended[job_id]
            raise TimeoutError(job_id)
        while time.perf_counter() < deadline:
            if self.status(job_id) in terminal:
                return time.perf_counter()
            time.sleep(0.001)
        raise TimeoutError(job_id)


class Databases:
    """`--engine postgres`: a throwaway PostgreSQL server (the test suite's, tests/pg.py) and
    a fresh database per run; `--engine sqlite`: no server, empty DSNs."""

    def __init__(self, engine: str):
        self.server = None
        if engine == "postgres":
            sys.path.insert(0, str(ROOT))
            from tests.pg import PgServer, unavailable

            reason = unavailable()
            if reason:
                raise SystemExit(f"--engine postgres: {reason}")
            self.server = PgServer().start()

    def dsn(self) -> str:
        return self.server.fresh_database() if self.server else ""

    def close(self) -> None:
        if self.server:
            self.server.close()


def run_on_engine(args, run) -> None:
    """`run(args, dbs)` with the databases of `args.engine`, torn down afterwards."""
    print(f"engine: {args.engine}")
    dbs = Databases(args.engine)
    try:
        run(args, dbs)
    finally:
        dbs.close()


def engine_arg(ap) -> None:
    ap.add_argument(
        "--engine",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the store engine (postgres starts a throwaway server)",
    )


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def tree_pids(pid: int) -> list[int]:
    """`pid` and every process under it (the fork server and the render children)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(parents.get(p, ()))
    return out


def pss_mb(pid: int) -> float:
    """Proportional set size: shared pages split between the processes that map them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def pss_tree_mb(pid: int) -> float:
    """PSS of `pid`'s process tree: the process, its fork server and its render children."""
    return sum(pss_mb(p) for p in tree_pids(pid))


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def about(**what) -> None:
    """What a run measured against, so a reader can rerun it: versions, commit, load, args."""
    import os
    import platform

    import lxml.etree
    import trafilatura

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    args = ", ".join(f"{k} {v}" for k, v in what.items())
    print(
        f"Python {platform.python_version()}, trafilatura {trafilatura.__version__}, lxml "
        f"{'.'.join(map(str, lxml.etree.LXML_VERSION[:3]))}; commit {commit or '?'}; {args}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


def show(title: str, rows: list[tuple[str, str]]) -> None:
    print(f"\n== {title}")
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k.ljust(width)}  {v}")


async def bare_loop(urls: list[str]) -> float:
    """The baseline: a bare serial aiohttp loop calling the extractor as clean mode calls it
    (trafilatura, same options), on the page's text: what one would write by hand."""
    return (await bare_pages(urls))[0]


async def bare_pages(urls: list[str]) -> tuple[float, list[tuple[float, float]]]:
    """The bare loop's seconds, and each page's (download, extraction) seconds."""
    pages = []
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        for url in urls:
            t0 = time.perf_counter()
            async with session.get(url) as resp:
                html = await resp.text()
            t1 = time.perf_counter()
            render.extract_main(html, url, "txt")
            pages.append((t1 - t0, time.perf_counter() - t1))
        return time.perf_counter() - started, pages
