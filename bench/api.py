"""API under batch load: status and submit latency, interactive fetch while jobs drain, RSS.

Goals (docs/BENCHMARKS.md §Latest figures): `GET /v1/batch/{id}` p99 under 20 ms with 20 concurrent
clients and 8 live jobs; interactive `/v1/fetch` p50 while 8 jobs drain ÷ p50 alone under 1.2; API
RSS under 100 MB. Everything runs against real `sift serve` + `sift-worker` processes and a loopback
site.

    .venv/bin/python bench/api.py [--seconds 5] [--clients 20]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (
    Databases,
    Sift,
    Site,
    engine_arg,
    median,
    pct,
    rss_mb,
    run_on_engine,
    show,
)


async def timed(session, method, url, **kw) -> tuple[float, int]:
    t = time.perf_counter()
    async with session.request(method, url, **kw) as resp:
        await resp.read()
        return (time.perf_counter() - t) * 1000, resp.status


async def hammer(
    sift: Sift, paths: list[tuple[str, str, dict | None]], clients: int, seconds: float
) -> tuple[list[float], int]:
    """`clients` concurrent loops over `paths` for `seconds`; latencies (ms) and errors."""
    lat: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    headers = {"Authorization": f"Bearer {sift.key}"}
    async with aiohttp.ClientSession(headers=headers) as session:

        async def client(i: int) -> None:
            nonlocal errors
            n = i
            while time.perf_counter() < deadline:
                method, path, body = paths[n % len(paths)]
                ms, status = await timed(session, method, sift.url + path, json=body)
                lat.append(ms)
                errors += status >= 500
                n += 1

        await asyncio.gather(*(client(i) for i in range(clients)))
    return lat, errors


async def fetch_p50(sift: Sift, site: Site, n: int, tag: str) -> float:
    headers = {"Authorization": f"Bearer {sift.key}"}
    lat = []
    async with aiohttp.ClientSession(headers=headers) as session:
        for i in range(n):
            body = {"url": site.url(i, f"{tag}{i}")}
            ms, status = await timed(session, "POST", sift.url + "/v1/fetch", json=body)
            assert status == 200, status
            lat.append(ms)
    return median(lat)


def submit_jobs(sift: Sift, site: Site, jobs: int, targets: int, tag: str) -> list[str]:
    ids = []
    for j in range(jobs):
        body = {"targets": [{"url": site.url(t, f"{tag}{j}-{t}")} for t in range(targets)]}
        answer = sift.request("POST", "/v1/batch", body)
        assert answer.get("success"), answer
        ids.append(answer["job_id"])
    return ids


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--fetches", type=int, default=40)
    engine_arg(ap)
    run_on_engine(ap.parse_args(), run)


def run(args, dbs: Databases) -> None:
    site = Site(delay=0.02, pages=64).start()
    sift = Sift(
        site.port,
        batch={"jobs_per_caller": 8, "drain_tasks": 2},
        cache={"ttl": 0},
        dsn=dbs.dsn(),
    ).start()
    try:
        asyncio.run(fetch_p50(sift, site, 5, "warm"))
        alone = asyncio.run(fetch_p50(sift, site, args.fetches, "alone"))

        ids = submit_jobs(sift, site, 8, 32, "load")
        under_load = asyncio.run(fetch_p50(sift, site, args.fetches, "load"))
        polls = [("GET", f"/v1/batch/{i}?results=false", None) for i in ids]
        lat, errs = asyncio.run(hammer(sift, polls, args.clients, args.seconds))
        full = [("GET", f"/v1/batch/{i}", None) for i in ids]
        full_lat, full_errs = asyncio.run(hammer(sift, full, args.clients, args.seconds / 2))
        first = ids[0]
        live = sum(
            sift.get(f"/v1/batch/{i}?results=false")["status"] in ("queued", "running") for i in ids
        )
        resubmit = [
            (
                "POST",
                "/v1/batch",
                {"targets": [{"url": site.url(t, f"load0-{t}")} for t in range(32)]},
            )
        ]
        sub_lat, sub_errs = asyncio.run(hammer(sift, resubmit, args.clients, args.seconds / 2))
        api_rss = rss_mb(sift.pid("api"))
        assert sift.get(f"/v1/batch/{first}?results=false")["job_id"] == first
        show(
            f"GET /v1/batch/{{id}}?results=false: {args.clients} clients, 8 jobs draining "
            f"({live} still live at the end)",
            [
                (
                    "requests",
                    f"{len(lat)} in {args.seconds:g} s "
                    f"({len(lat) / args.seconds:.0f} req/s), 5xx: {errs}",
                ),
                ("p50", f"{median(lat):.2f} ms"),
                ("p99 (goal < 20 ms)", f"{pct(lat, 99):.2f} ms"),
            ],
        )
        show(
            f"GET /v1/batch/{{id}} with inline results: {args.clients} clients",
            [
                ("requests", f"{len(full_lat)}, 5xx: {full_errs}"),
                ("p50", f"{median(full_lat):.2f} ms"),
                ("p99", f"{pct(full_lat, 99):.2f} ms"),
            ],
        )
        show(
            f"POST /v1/batch (idempotent resubmit): {args.clients} clients",
            [
                (
                    "requests",
                    f"{len(sub_lat)} ({len(sub_lat) / (args.seconds / 2):.0f} req/s), "
                    f"5xx: {sub_errs}",
                ),
                ("p50", f"{median(sub_lat):.2f} ms"),
                ("p99", f"{pct(sub_lat, 99):.2f} ms"),
            ],
        )
        show(
            "interactive /v1/fetch p50 (20 ms site delay, cache off)",
            [
                ("alone", f"{alone:.2f} ms"),
                ("while 8 jobs drain", f"{under_load:.2f} ms"),
                ("ratio (goal < 1.2)", f"{under_load / alone:.3f}"),
            ],
        )
        show("memory", [("API RSS (goal < 100 MB)", f"{api_rss:.1f} MB")])
    finally:
        sift.stop()
        site.stop()


if __name__ == "__main__":
    main()
