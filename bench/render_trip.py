"""The render-child round trip: what sending a body to a render child and back costs.

A step that does no work (`len` of the body) in a render child, for a 100 KB page and a 10 MiB
body (`[fetch] max_body`), median of many runs, and this process's peak RSS afterwards, which
shows what the body costs on the way besides itself (docs/BENCHMARKS.md §Render isolation).
Starts no server and needs no network.

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
from sift.fetch.renderpool import RenderPool


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=400)
    asyncio.run(measure(ap.parse_args().runs))


if __name__ == "__main__":
    main()
