"""Batch drain: efficiency against a bare serial loop, per-target overhead, wake-up, memory.

Goals (docs/BENCHMARKS.md §Latest figures): drain efficiency (bare serial aiohttp + extractor loop
time ÷ submit→done time, 32 article pages) ≥ 0.95 at 20 ms server delay and ≥ 0.80 at 0 ms; wake-up
(submit → first target request at the site) p50 under 10 ms with the nudge; memory with 8 live
jobs of 32 targets and large results: RSS, and PSS of each main process and of its process
tree (fork server and render children). Real `sift serve` + `sift-worker` processes; job
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (
    Databases,
    JobWatch,
    Sift,
    Site,
    about,
    bare_loop,
    engine_arg,
    median,
    pss_mb,
    pss_tree_mb,
    rss_mb,
    run_on_engine,
    show,
)


def submit(sift: Sift, urls: list[str]) -> str:
    answer = sift.request("POST", "/v1/batch", {"targets": [{"url": u} for u in urls]})
    assert answer.get("success") and not answer["reused"], answer
    return answer["job_id"]


def efficiency(delay: float, n: int, rounds: int = 5, dsn: str = "") -> tuple[float, float, float]:
    """(bare seconds, submit→done seconds, ratio) for n pages at `delay` server delay, each the
    best of `rounds` alternating rounds (this machine's speed drifts by tens of percent)."""
    site = Site(delay=delay, pages=n).start()
    sift = Sift(site.port, cache={"ttl": 0}, dsn=dsn).start()
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


def two_jobs(n: int, rounds: int = 3) -> tuple[float, float, float]:
    """(bare seconds for 2n pages, submit→both done with two drain tasks, ratio): two jobs
    render at once only where rendering leaves the worker's interpreter."""
    site = Site(pages=n).start()
    sift = Sift(
        site.port,
        cache={"ttl": 0},
        batch={"drain_tasks": 2, "jobs_per_caller": 2},
        gates={"per_host": 8},  # both tasks fetch from the one loopback host
    ).start()
    try:
        watch = JobWatch(sift)
        warm = [submit(sift, [site.url(i, f"warm{j}") for i in range(2)]) for j in range(2)]
        for job in warm:
            watch.wait_terminal(job)
        best_bare, best_sift = float("inf"), float("inf")
        for r in range(rounds):
            urls = [site.url(i, f"b{r}") for i in range(2 * n)]
            best_bare = min(best_bare, asyncio.run(bare_loop(urls)))
            t0 = time.perf_counter()
            jobs = [submit(sift, [site.url(i, f"s{r}{j}") for i in range(n)]) for j in range(2)]
            best_sift = min(best_sift, max(watch.wait_terminal(job) for job in jobs) - t0)
        return best_bare, best_sift, best_bare / best_sift
    finally:
        sift.stop()
        site.stop()


def wakeups(samples: int, *, nudge: bool, dsn: str = "") -> list[float]:
    """Submit → first request at the site, in ms (postgres: woken by NOTIFY)."""
    site = Site(pages=4).start()
    sift = Sift(site.port, batch={"poll_interval": "2s"}, dsn=dsn).start()
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


def worker_rss(jobs: int, targets: int, dsn: str = "") -> dict[str, float]:
    """Peak worker and API RSS, PSS and process-tree PSS (MB) while `jobs` × `targets` large
    pages drain (PSS sampled every 0.2 s: reading it walks every mapping)."""
    site = Site(pages=64).start()
    sift = Sift(
        site.port,
        batch={"jobs_per_caller": jobs, "drain_tasks": 2},
        cache={"ttl": 0},
        fetch={"output_cap": 100000},
        dsn=dsn,
    ).start()
    peak = {f"{name} {what}": 0.0 for name in ("worker", "api") for what in ("rss", "pss", "tree")}
    stop = threading.Event()

    def sample() -> None:
        turn = 0
        while not stop.is_set():
            for name in ("worker", "api"):
                pid = sift.pid(name)
                peak[f"{name} rss"] = max(peak[f"{name} rss"], rss_mb(pid))
                if turn % 10 == 0:
                    peak[f"{name} pss"] = max(peak[f"{name} pss"], pss_mb(pid))
                    peak[f"{name} tree"] = max(peak[f"{name} tree"], pss_tree_mb(pid))
            turn += 1
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
        return peak
    finally:
        stop.set()
        sift.stop()
        site.stop()


def scaling(processes: int, dsn: str, *, jobs: int = 8, targets: int = 12) -> float:
    """Seconds to drain `jobs` jobs of `targets` 100 ms pages over 4 hosts (job j on host
    j mod 4) with `processes` worker processes of 2 drain tasks each (postgres only)."""
    site = Site(delay=0.1, pages=targets, hosts=4).start()
    sift = Sift(
        site.port,
        batch={"jobs_per_caller": jobs, "drain_tasks": 2},
        cache={"ttl": 0},
        gates={"per_host": 3, "global": 16},
        dsn=dsn,
        workers=processes,
        networks="127.0.0.0/29",
    ).start()
    try:
        watch = JobWatch(sift)
        t0 = time.perf_counter()
        ids = [
            submit(sift, [site.url(t, f"w{processes}-{j}", host=1 + j % 4) for t in range(targets)])
            for j in range(jobs)
        ]
        done = max(watch.wait_terminal(job) for job in ids)
        assert all(watch.status(job) == "done" for job in ids), [watch.status(j) for j in ids]
        return done - t0
    finally:
        sift.stop()
        site.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, default=32)
    ap.add_argument("--wakeups", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per efficiency figure")
    engine_arg(ap)
    run_on_engine(ap.parse_args(), run)


def run(args, dbs: Databases) -> None:
    n = args.targets
    about(
        engine=args.engine,
        pages=f"{n} synthetic articles of about 100 KB",
        delays="20 and 0 ms",
        rounds=args.rounds,
    )
    if args.engine == "postgres":
        one = scaling(1, dbs.dsn())
        rows = [("1 worker process", f"{one:.2f} s")]
        for processes in (2, 4):
            t = scaling(processes, dbs.dsn())
            rows.append((f"{processes} worker processes", f"{t:.2f} s ({one / t:.2f}×)"))
        show("throughput: 8 jobs × 12 pages over 4 hosts, 100 ms pages (goal 1→2: ≥ 1.8×)", rows)
    for delay in (0.02, 0.0):
        bare, ours, ratio = efficiency(delay, n, args.rounds, dbs.dsn())
        goal = "≥ 0.95" if delay else "≥ 0.80"
        show(
            f"drain efficiency, {n} article pages, {delay * 1000:g} ms server delay",
            [
                ("bare serial aiohttp + extractor", f"{bare * 1000:.0f} ms"),
                ("sift submit → done", f"{ours * 1000:.0f} ms"),
                (f"efficiency (goal {goal})", f"{ratio:.3f}"),
                ("per-target overhead", f"{(ours - bare) / n * 1000:.2f} ms"),
            ],
        )
    bare, ours, ratio = two_jobs(n, args.rounds)
    show(
        f"two jobs of {n} article pages, two drain tasks, 0 ms server delay",
        [
            (f"bare serial loop, {2 * n} pages", f"{bare * 1000:.0f} ms"),
            ("sift submit → both done", f"{ours * 1000:.0f} ms"),
            ("bare ÷ sift (above 1: faster than serial)", f"{ratio:.3f}"),
        ],
    )
    with_nudge = wakeups(args.wakeups, nudge=True, dsn=dbs.dsn())
    rows = [
        ("with the nudge (postgres: NOTIFY), p50 (goal < 10 ms)", f"{median(with_nudge):.2f} ms"),
        ("with the nudge, max", f"{max(with_nudge):.2f} ms"),
    ]
    if args.engine == "sqlite":
        polling = wakeups(max(3, args.wakeups // 3), nudge=False)
        rows.append(("polling only (poll_interval 2 s), p50", f"{median(polling):.0f} ms"))
    show("wake-up: submit → first target request at the site", rows)
    peak = worker_rss(8, n, dbs.dsn())
    show(
        f"memory, 8 live jobs × {n} targets, large results",
        [
            ("worker peak RSS", f"{peak['worker rss']:.1f} MB"),
            ("API peak RSS", f"{peak['api rss']:.1f} MB"),
            (
                "worker / API main process peak PSS (goal < 100 MB)",
                f"{peak['worker pss']:.1f} / {peak['api pss']:.1f} MB",
            ),
            (
                "worker / API process tree peak PSS (goal < 150 MB)",
                f"{peak['worker tree']:.1f} / {peak['api tree']:.1f} MB",
            ),
        ],
    )


if __name__ == "__main__":
    main()
