"""Events under load: how soon a stored target reaches an SSE client and a webhook receiver,
and what 100 open streams cost the API (docs/BENCHMARKS.md §Events).

Real `sift serve` + `sift-worker` processes, a loopback article site (each page delayed) and a
webhook receiver in this process. Eight jobs of 32 targets drain while 100 event streams
(spread over the eight jobs) follow them and every job's `target.*` events are delivered to the
receiver. Latency is the event's stored time (`batch_event.at`, the worker's clock) to its
arrival (this process's clock; one machine). Status reads are timed before the streams open
and while they are open, in the same run.

    .venv/bin/python bench/events.py [--streams 100] [--delay 0.15] [--engine postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.api import hammer
from bench.common import (
    ROOT,
    Databases,
    JobWatch,
    Sift,
    Site,
    engine_arg,
    median,
    pct,
    run_on_engine,
    show,
)
from tests.e2e.procs import free_port


def pss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Receiver:
    def __init__(self):
        self.arrived: dict[str, float] = {}

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.arrived.setdefault(request.headers["webhook-id"], time.time())
        return web.Response(status=204)


async def follow(session, url: str, job_id: str, seen: dict, done: list) -> None:
    """Follow one stream; each frame's arrival is kept with the time the stream opened (an
    event stored before that is a replay, not a live delivery)."""
    async with session.get(f"{url}/v1/batch/{job_id}/events") as resp:
        opened = time.time()
        async for line in resp.content:
            if line.startswith(b"data: "):
                event = orjson.loads(line[6:])
                key = (job_id, event["data"]["event_id"])
                seen.setdefault(key, []).append((time.time(), opened))
    done.append(job_id)


class Notes:
    """On PostgreSQL, the arrival of every `sift_events` notification at a listener of this
    process: the database's share of the latency (commit and notify), before any API work."""

    def __init__(self, dsn: str | None):
        self.dsn, self.got, self._stop = dsn, [], threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)

    def start(self) -> Notes:
        self.since = time.time()
        if self.dsn:
            self._thread.start()
        return self

    def _listen(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("listen sift_events")
            while not self._stop.is_set():
                for note in conn.notifies(timeout=0.5):
                    self.got.append((note.payload, time.time()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def latencies(self, stored: dict) -> list[float]:
        """Each event to the first notification of its job that arrived after it was stored."""
        by_job: dict[str, list[float]] = {}
        for job, t in self.got:
            by_job.setdefault(job, []).append(t)
        out = []
        for (job, _), at in stored.items():
            if at < self.since + 0.5:
                continue  # stored before the listener surely listened
            later = [t for t in by_job.get(job, ()) if t >= at]
            if later:
                out.append((min(later) - at) * 1000)
        return out


def stored_times(sift: Sift, ids: list[str]) -> dict[tuple[str, int], float]:
    if sift.dsn:
        import psycopg

        with psycopg.connect(sift.dsn) as conn:
            rows = conn.execute(
                "select job_id, id, at from batch_event where job_id = any(%s)", (ids,)
            ).fetchall()
    else:
        import apsw

        db = apsw.Connection(str(sift.dir / "state" / "sift.db"), flags=apsw.SQLITE_OPEN_READONLY)
        marks = ", ".join("?" * len(ids))
        rows = db.execute(
            f"select job_id, id, at from batch_event where job_id in ({marks})", ids
        ).fetchall()
    return {(j, i): at for j, i, at in rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument("--delay", type=float, default=0.15, help="seconds each page takes")
    ap.add_argument("--seconds", type=float, default=4.0, help="each status-read phase")
    ap.add_argument("--rounds", type=int, default=3, help="drain rounds with and without webhooks")
    ap.add_argument("--no-drain", action="store_true", help="latency and streams only")
    engine_arg(ap)
    run_on_engine(ap.parse_args(), run)


def run(args, dbs: Databases) -> None:
    asyncio.run(_run(args, dbs))
    if not args.no_drain:
        asyncio.run(_drain(args, dbs))


async def _drain(args, dbs: Databases) -> None:
    """Drain time of one 32-page job (20 ms page delay) with every event delivered to a
    webhook and without one: alternating rounds in one run, the best of each."""
    receiver = Receiver()
    hook_app = web.Application()
    hook_app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(hook_app, access_log=None)
    await runner.setup()
    hook_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", hook_port).start()
    site = Site(delay=0.02, pages=32).start()
    sift = Sift([site.port, hook_port], cache={"ttl": 0}, dsn=dbs.dsn()).start()
    try:
        _secret(sift)
        watch = JobWatch(sift)
        hook = {"url": f"http://127.0.0.1:{hook_port}/hook", "events": ["*"]}
        best = {False: float("inf"), True: float("inf")}
        for r in range(args.rounds + 1):  # the first round warms up
            for with_hook in (False, True):
                body = {"targets": [{"url": site.url(i, f"d{r}{with_hook}")} for i in range(32)]}
                if with_hook:
                    body["webhook"] = hook
                t0 = time.perf_counter()
                job = sift.request("POST", "/v1/batch", body)["job_id"]
                took = await asyncio.to_thread(watch.wait_terminal, job)
                if r:
                    best[with_hook] = min(best[with_hook], took - t0)
        await asyncio.sleep(1.0)
        show(
            f"drain: 32 pages, 20 ms delay, best of {args.rounds} alternating rounds",
            [
                ("submit -> done, no webhook", f"{best[False] * 1000:.0f} ms"),
                ("submit -> done, every event to a webhook", f"{best[True] * 1000:.0f} ms"),
                ("ratio (goal: unchanged)", f"{best[False] / best[True]:.3f}"),
                ("deliveries made", f"{len(receiver.arrived)}"),
            ],
        )
    finally:
        sift.stop()
        site.stop()
        await runner.cleanup()


def _secret(sift: Sift) -> None:
    subprocess.run(
        [sys.executable, "-m", "sift", "keys", "webhook-secret", "bench", "--config", sift.config],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )


async def _run(args, dbs: Databases) -> None:
    receiver = Receiver()
    hook_app = web.Application()
    hook_app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(hook_app, access_log=None)
    await runner.setup()
    hook_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", hook_port).start()
    site = Site(delay=args.delay, pages=64).start()
    sift = Sift(
        [site.port, hook_port],
        batch={"jobs_per_caller": 8, "drain_tasks": 2},
        cache={"ttl": 0},
        dsn=dbs.dsn(),
    ).start()
    try:
        _secret(sift)
        hook = {"url": f"http://127.0.0.1:{hook_port}/hook", "events": ["target.*", "job.*"]}
        ids = []
        for j in range(8):
            body = {
                "targets": [{"url": site.url(t, f"ev{j}-{t}")} for t in range(32)],
                "webhook": hook,
            }
            answer = sift.request("POST", "/v1/batch", body)
            assert answer.get("success"), answer
            ids.append(answer["job_id"])
        polls = [("GET", f"/v1/batch/{i}?results=false", None) for i in ids]
        before, _ = await hammer(sift, polls, 20, args.seconds)
        pss_before = pss_mb(sift.pid("api"))

        notes = Notes(sift.dsn).start()
        seen: dict[tuple[str, int], list[tuple[float, float]]] = {}
        done: list[str] = []
        headers = {"Authorization": f"Bearer {sift.key}"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(
            headers=headers, timeout=timeout, connector=connector
        ) as session:
            streams = [
                asyncio.create_task(follow(session, sift.url, ids[s % 8], seen, done))
                for s in range(args.streams)
            ]
            await asyncio.sleep(1.0)
            during, errors = await hammer(sift, polls, 20, args.seconds)
            peak = pss_mb(sift.pid("api"))
            live = sum(
                sift.get(f"/v1/batch/{i}?results=false")["status"] in ("queued", "running")
                for i in ids
            )
            while len(done) < args.streams:
                await asyncio.sleep(0.5)
                peak = max(peak, pss_mb(sift.pid("api")))
            await asyncio.gather(*streams)
        await asyncio.sleep(1.0)  # the last deliveries
        notes.stop()
        stored = stored_times(sift, ids)
        noted = notes.latencies(stored)
        sse = [
            (t - stored[key]) * 1000
            for key, times in seen.items()
            if key in stored
            for t, opened in times
            if stored[key] > opened
        ]
        hooks = [
            (receiver.arrived[f"msg_{j}_{i}"] - at) * 1000
            for (j, i), at in stored.items()
            if f"msg_{j}_{i}" in receiver.arrived
        ]
        show(
            f"event latency: {args.streams} streams on 8 jobs of 32 targets, webhooks on",
            [
                ("events stored", f"{len(stored)}"),
                ("live SSE frames timed", f"{len(sse)} (stored after their stream opened)"),
                ("stored -> SSE p50 (goal < 50 ms)", f"{median(sse):.1f} ms"),
                ("stored -> SSE p90 / p99", f"{pct(sse, 90):.1f} / {pct(sse, 99):.1f} ms"),
                *(
                    [
                        (
                            "stored -> NOTIFY at a listener p50 / p90",
                            f"{median(noted):.1f} / {pct(noted, 90):.1f} ms",
                        )
                    ]
                    if noted
                    else []
                ),
                ("webhooks delivered", f"{len(hooks)} of {len(stored)}"),
                ("stored -> webhook p50 (goal < 50 ms)", f"{median(hooks):.1f} ms"),
                ("stored -> webhook p90 / p99", f"{pct(hooks, 90):.1f} / {pct(hooks, 99):.1f} ms"),
            ],
        )
        show(
            "status reads (results=false), 20 clients",
            [
                (
                    "before the streams: p50 / p99",
                    f"{median(before):.2f} / {pct(before, 99):.2f} ms",
                ),
                (
                    f"with {args.streams} streams open: p50 / p99",
                    f"{median(during):.2f} / {pct(during, 99):.2f} ms (5xx: {errors}, "
                    f"{live} jobs still live)",
                ),
                ("p99 ratio", f"{pct(during, 99) / pct(before, 99):.2f}"),
            ],
        )
        show(
            "API memory",
            [
                ("PSS before the streams", f"{pss_before:.1f} MB"),
                (f"PSS peak with {args.streams} streams (goal < 150 MB)", f"{peak:.1f} MB"),
            ],
        )
    finally:
        sift.stop()
        site.stop()
        await runner.cleanup()


if __name__ == "__main__":
    main()
