"""The render-child round trip: what sending a body to a render child and back costs.

A step that does no work (`len` of the body) in a render child, for a 100 KB page and a 10 MiB
body (`[fetch] max_body`), median of many runs, and this process's peak RSS afterwards, which
shows what the body costs on the way besides itself; then small pages (1–11 KB, what once
rendered in the serving process) rendered in-process and in a child, alternated in one run, and
a new pool's first render with and without a prestarted, warmed child
(docs/BENCHMARKS.md §Render isolation). Starts no server and needs no network.

    .venv/bin/python bench/render_trip.py [--runs 400]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import show
from sift.config import RenderConfig
from sift.fetch import render
from sift.fetch.renderpool import RenderPool
from tests.site import article_html

SMALL_PAGES = [article_html(n, words=150 * n).encode() for n in range(8)]  # 1.3–11 KB


async def trips(pool: RenderPool, body: bytes, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await pool.run("bench", len, body, timeout=30)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


async def measure(runs: int) -> None:
    pool = RenderPool(RenderConfig())
    page, big = os.urandom(100 * 1024), os.urandom(10 * 1024 * 1024)
    try:
        await pool.run("bench", len, page, timeout=30)  # the child is started and warm
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        page_ms = await trips(pool, page, runs)
        big_ms = await trips(pool, big, max(4, runs // 10))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    finally:
        await pool.close()
    show(
        "render child round trip (a step that does no work)",
        [
            ("100 KB body, median", f"{page_ms:.2f} ms"),
            ("10 MiB body, median", f"{big_ms:.1f} ms"),
            ("peak RSS before / after the 10 MiB trips", f"{before:.0f} / {peak:.0f} MB"),
        ],
    )


def _small(body: bytes) -> tuple:
    return ("html", body, "text/html; charset=utf-8", "clean", "http://bench.invalid/")


async def small_pages(runs: int) -> None:
    """The same small pages in-process and in a child, alternated page by page."""
    pool = RenderPool(RenderConfig())
    here, there = [], []
    try:
        await pool.run("bench", render.render_body, *_small(SMALL_PAGES[0]), timeout=30)
        for i in range(runs):
            args = _small(SMALL_PAGES[i % len(SMALL_PAGES)])
            t0 = time.perf_counter()
            render.render_body(*args)
            here.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await pool.run("bench", render.render_body, *args, timeout=30)
            there.append(time.perf_counter() - t0)
    finally:
        await pool.close()
    a, b = statistics.median(here) * 1000, statistics.median(there) * 1000
    show(
        "small pages (1-11 KB), median",
        [
            ("in the serving process (the old inline path)", f"{a:.2f} ms"),
            ("in a render child", f"{b:.2f} ms"),
            ("child / in-process", f"{b / a:.2f}"),
        ],
    )


async def first_render(warm: bool) -> float:
    pool = RenderPool(RenderConfig())
    try:
        if warm:
            pool.prestart()
            await pool._warming
        t0 = time.perf_counter()
        await pool.run("bench", render.render_body, *_small(SMALL_PAGES[3]), timeout=30)
        return time.perf_counter() - t0
    finally:
        await pool.close()


async def first_renders(rounds: int) -> None:
    cold, warm = [], []
    for _ in range(rounds):
        cold.append(await first_render(False))
        warm.append(await first_render(True))
    show(
        "a new pool's first small render, median",
        [
            ("no child yet (fork, then a cold child's first render)", f"{_ms(cold)} ms"),
            ("prestarted, warmed child", f"{_ms(warm)} ms"),
        ],
    )


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f}"


async def everything(runs: int) -> None:
    await measure(runs)
    await small_pages(runs)
    await first_renders(max(3, runs // 40))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=400)
    asyncio.run(everything(ap.parse_args().runs))


if __name__ == "__main__":
    main()
