"""Interactive fetch: Sift's /v1/fetch + render against a bare aiohttp + extractor loop.

Prints pages/s for both and their ratio (goal: Sift within 10 % of the bare loop, ratio ≥ 0.9)
and the p50 latency of a content-cache hit (goal: under 5 ms). Both loops fetch the same
realistic article pages from a loopback site, serially; the bare loop calls the extractor as
clean mode calls it (trafilatura, same options), so the ratio is Sift's own cost on top of the
extraction: HTTP API, guard, gates, content-cache write, title and bot-wall checks, envelope.

    .venv/bin/python bench/fetch.py [--pages 48]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import Sift, Site, about, bare_loop, median, pct, show


async def sift_loop(sift: Sift, urls: list[str]) -> float:
    return (await sift_calls(sift, urls))[0]


async def sift_calls(sift: Sift, urls: list[str]) -> tuple[float, list[float]]:
    """Serial `/v1/fetch` calls on one kept-alive session: their seconds, and each call's."""
    headers = {"Authorization": f"Bearer {sift.key}"}
    calls = []
    async with aiohttp.ClientSession(headers=headers) as session:
        started = time.perf_counter()
        for url in urls:
            t0 = time.perf_counter()
            async with session.post(f"{sift.url}/v1/fetch", json={"url": url}) as resp:
                body = await resp.json()
            calls.append(time.perf_counter() - t0)
            assert body.get("success"), body
        return time.perf_counter() - started, calls


async def cache_hits(sift: Sift, url: str, n: int) -> list[float]:
    headers = {"Authorization": f"Bearer {sift.key}"}
    lat = []
    async with aiohttp.ClientSession(headers=headers) as session:
        for _ in range(n):
            t = time.perf_counter()
            async with session.post(f"{sift.url}/v1/fetch", json={"url": url}) as resp:
                body = await resp.json()
            lat.append((time.perf_counter() - t) * 1000)
            assert body["cached"], body
    return lat


def throughput(delay: float, pages: int, rounds: int = 5) -> tuple[float, float]:
    """Best-of-`rounds` seconds for the bare loop and for /v1/fetch over `pages` pages."""
    site = Site(pages=pages, delay=delay).start()
    sift = Sift(site.port, worker=False).start()
    try:
        sift.request("POST", "/v1/fetch", {"url": site.url(0, "warm")})
        asyncio.run(bare_loop([site.url(0, "warm")]))
        times = []
        for r in range(rounds):
            bare = asyncio.run(bare_loop([site.url(n, f"b{r}") for n in range(pages)]))
            ours = asyncio.run(sift_loop(sift, [site.url(n, f"s{r}") for n in range(pages)]))
            times.append((bare, ours))
        return min(b for b, _ in times), min(o for _, o in times)
    finally:
        sift.stop()
        site.stop()


def cache_hit_latency(hits: int) -> list[float]:
    site = Site(pages=2).start()
    sift = Sift(site.port, worker=False).start()
    try:
        hit_url = site.url(1, "hit")
        sift.request("POST", "/v1/fetch", {"url": hit_url})
        return asyncio.run(cache_hits(sift, hit_url, hits))
    finally:
        sift.stop()
        site.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=48)
    ap.add_argument("--hits", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per throughput figure")
    args = ap.parse_args()
    about(pages=f"{args.pages} synthetic articles", delays="0 and 20 ms", rounds=args.rounds)
    for delay, goal in ((0.0, ""), (0.02, " (goal ≥ 0.9)")):
        bare, ours = throughput(delay, args.pages, args.rounds)
        show(
            f"fetch + render throughput, {delay * 1000:g} ms server delay "
            f"(serial, best of {args.rounds})",
            [
                ("pages", str(args.pages)),
                ("bare aiohttp + extractor", f"{args.pages / bare:.1f} pages/s"),
                ("sift /v1/fetch", f"{args.pages / ours:.1f} pages/s"),
                (f"ratio sift / bare{goal}", f"{bare / ours:.3f}"),
                ("overhead per page", f"{(ours - bare) / args.pages * 1000:.2f} ms"),
            ],
        )
    lat = cache_hit_latency(args.hits)
    show(
        "content-cache hit latency (HTTP round trip, keep-alive)",
        [
            ("requests", str(args.hits)),
            ("p50 (goal < 5 ms)", f"{median(lat):.2f} ms"),
            ("p99", f"{pct(lat, 99):.2f} ms"),
        ],
    )


if __name__ == "__main__":
    main()
