"""Batch drain: efficiency against a bare serial loop, per-target overhead, wake-up, worker RSS.

Goals (docs/BENCHMARKS.md §Latest figures): drain efficiency (bare serial aiohttp + extractor loop
time ÷ submit→done time, 32 article pages) ≥ 0.95 at 20 ms server delay and ≥ 0.85 at 0 ms; wake-up
(submit → first target request at the site) p50 under 10 ms with the nudge; worker RSS with 8 live
jobs of 32 targets and large results under 150 MB. Real `sift serve` + `sift-worker` processes; job
completion is observed through a read-only connection to the database file, polled every
millisecond, so the measurement adds no delay of its own.

    .venv/bin/python bench/drain.py [--targets 32] [--wakeups 10]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import Sift, Site, bare_loop, median, rss_mb, show
from sift.status import TERMINAL


class JobWatch:
    """Reads job status straight from the database file (read-only) at 1 ms intervals."""

    def __init__(self, sift: Sift):
        self.db = apsw.Connection(
            str(sift.dir / "state" / "sift.db"), flags=apsw.SQLITE_OPEN_READONLY
        )

    def status(self, job_id: str) -> str | None:
        row = self.db.execute("select status from batch_job where id = ?", (job_id,)).fetchone()
        return row[0] if row else None

    def wait_terminal(self, job_id: str, timeout: float = 300) -> float:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self.status(job_id) in TERMINAL:
                return time.perf_counter()
            time.sleep(0.001)
        raise TimeoutError(job_id)


def submit(sift: Sift, urls: list[str]) -> str:
    answer = sift.request("POST", "/v1/batch", {"targets": [{"url": u} for u in urls]})
    assert answer.get("success") and not answer["reused"], answer
    return answer["job_id"]


def efficiency(delay: float, n: int, rounds: int = 5) -> tuple[float, float, float]:
    """(bare seconds, submit→done seconds, ratio) for n pages at `delay` server delay, each the
    best of `rounds` alternating rounds (this machine's speed drifts by tens of percent)."""
    site = Site(delay=delay, pages=n).start()
    sift = Sift(site.port, cache={"ttl": 0}).start()
    try:
        watch = JobWatch(sift)
        asyncio.run(bare_loop([site.url(0, "warm")]))
        warm = submit(sift, [site.url(0, "warm")])
        watch.wait_terminal(warm)
        best_bare, best_sift = float("inf"), float("inf")
        for r in range(rounds):
            best_bare = min(
                best_bare, asyncio.run(bare_loop([site.url(i, f"b{r}") for i in range(n)]))
            )
            t0 = time.perf_counter()
            job = submit(sift, [site.url(i, f"s{r}") for i in range(n)])
            best_sift = min(best_sift, watch.wait_terminal(job) - t0)
            assert watch.status(job) == "done", watch.status(job)
        return best_bare, best_sift, best_bare / best_sift
    finally:
        sift.stop()
        site.stop()


def wakeups(samples: int, *, nudge: bool) -> list[float]:
    """Submit → first request at the site, in ms."""
    site = Site(pages=4).start()
    sift = Sift(site.port, batch={"poll_interval": "2s"}).start()
    try:
        watch = JobWatch(sift)
        if not nudge:
            (sift.dir / "state" / "worker.sock").unlink()  # nudges now go nowhere
        out = []
        for i in range(samples):
            tag = f"{'n' if nudge else 'p'}{i}"
            url = site.url(0, tag)
            t0 = time.perf_counter()
            job = submit(sift, [url])
            watch.wait_terminal(job)
            out.append((site.first_hit(f"/a/0?{tag}") - t0) * 1000)
        return out
    finally:
        sift.stop()
        site.stop()


def worker_rss(jobs: int, targets: int) -> tuple[float, float]:
    """Peak worker and API RSS (MB) while `jobs` × `targets` large pages drain."""
    site = Site(pages=64).start()
    sift = Sift(
        site.port,
        batch={"jobs_per_caller": jobs, "drain_tasks": 2},
        cache={"ttl": 0},
        fetch={"output_cap": 100000},
    ).start()
    peak = {"worker": 0.0, "api": 0.0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for name in peak:
                peak[name] = max(peak[name], rss_mb(sift.pid(name)))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        watch = JobWatch(sift)
        ids = [
            submit(sift, [site.url(t, f"r{j}-{t}") for t in range(targets)]) for j in range(jobs)
        ]
        sampler.start()
        for job in ids:
            watch.wait_terminal(job)
        return peak["worker"], peak["api"]
    finally:
        stop.set()
        sift.stop()
        site.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, default=32)
    ap.add_argument("--wakeups", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per efficiency figure")
    args = ap.parse_args()
    n = args.targets
    for delay in (0.02, 0.0):
        bare, ours, ratio = efficiency(delay, n, args.rounds)
        goal = "≥ 0.95" if delay else "≥ 0.85"
        show(
            f"drain efficiency, {n} article pages, {delay * 1000:g} ms server delay",
            [
                ("bare serial aiohttp + extractor", f"{bare * 1000:.0f} ms"),
                ("sift submit → done", f"{ours * 1000:.0f} ms"),
                (f"efficiency (goal {goal})", f"{ratio:.3f}"),
                ("per-target overhead", f"{(ours - bare) / n * 1000:.2f} ms"),
            ],
        )
    with_nudge = wakeups(args.wakeups, nudge=True)
    polling = wakeups(max(3, args.wakeups // 3), nudge=False)
    show(
        "wake-up: submit → first target request at the site",
        [
            ("with the nudge, p50 (goal < 10 ms)", f"{median(with_nudge):.2f} ms"),
            ("with the nudge, max", f"{max(with_nudge):.2f} ms"),
            ("polling only (poll_interval 2 s), p50", f"{median(polling):.0f} ms"),
        ],
    )
    worker, api = worker_rss(8, n)
    show(
        f"memory, 8 live jobs × {n} targets, large results",
        [
            ("worker peak RSS (goal < 150 MB)", f"{worker:.1f} MB"),
            ("API peak RSS (goal < 100 MB)", f"{api:.1f} MB"),
        ],
    )


if __name__ == "__main__":
    main()
