"""The drain's idle time while work is ready (docs/WORKER.md §The scheduler's guarantees, 1).

The shape of the defect the scheduler fixed, with real `sift serve` + `sift-worker`
processes, `[batch] drain_tasks = 1`: bob has used the drain for ~3 s; alice's first job starts
a 6 s target on 127.0.0.1, which is handed off after 0.25 s; then alice submits a second job
and bob a job, both on 127.0.0.2 (a host with room). Every one of their targets is ready from
its submit: the drain should serve them back to back while the slow target runs.

Prints the idle time of the drain while that work was ready (with room at the gates for all
of it): from the submits to the first request, plus every stretch with none of it in flight on
127.0.0.2 (the site's own clock). Goal: under 50 ms in total (what remains is the store and
claim of each step). The earlier drain held alice's second job behind her handed-off target.

    .venv/bin/python bench/idle.py [--rounds 3] [--targets 4]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import JobWatch, Sift, Site, median, show

SLOW = 6.0
STEP = 0.3  # seconds each of bob's targets takes


def submit(sift: Sift, urls: list[str], who: str) -> str:
    body = {"targets": [{"url": u} for u in urls]}
    answer = sift.request("POST", "/v1/batch", body, key=sift.keys[who])
    assert answer.get("success"), answer
    return answer["job_id"]


def one_round(site: Site, n: int, tag: str) -> tuple[float, float]:
    """Seconds with none of the ready work in flight: while alice's slow target runs handed
    off, and for the same work alone (the pipeline's own time between two requests: the
    render, the store, the next claim)."""
    sift = Sift(
        site.port,
        networks="127.0.0.0/30",
        callers=("alice", "bob"),
        batch={"drain_tasks": 1, "jobs_per_caller": 8},
        gates={"per_host": 4},  # room on each host for every fetch here: ready means ready
        cache={"ttl": 0},
    ).start()
    try:
        watch = JobWatch(sift)
        for host in (1, 2):  # robots.txt is read once per origin; keep it out of the timing
            watch.wait_terminal(submit(sift, [site.url(0, f"{tag}warm{host}", host)], "bob"))
        used = [site.url(i, f"{tag}u{i}&s=0.9") for i in range(3)]
        watch.wait_terminal(submit(sift, used, "bob"))
        slow = site.url(0, f"{tag}slow&s={SLOW}")
        a1 = submit(sift, [slow, site.url(1, f"{tag}a1")], "alice")
        _wait_hit(site, f"/a/0?{tag}slow&s={SLOW}")
        time.sleep(0.5)  # handed off by now
        during = _gaps(sift, watch, site, n, f"{tag}d")
        watch.wait_terminal(a1)
        alone = _gaps(sift, watch, site, n, f"{tag}q")
        return during, alone
    finally:
        sift.stop()


def _gaps(sift: Sift, watch: JobWatch, site: Site, n: int, tag: str) -> float:
    t0 = time.perf_counter()
    a2 = submit(sift, [site.url(i, f"{tag}c{i}", 2) for i in range(n)], "alice")
    b = submit(sift, [site.url(i, f"{tag}b{i}&s={STEP}", 2) for i in range(n)], "bob")
    for job in (a2, b):
        watch.wait_terminal(job)
    spans = sorted((s, e) for p, s, e in _spans(site) if f"{tag}c" in p or f"{tag}b" in p)
    idle, busy_until = 0.0, t0
    for start, end in spans:  # time with none of this work in flight
        idle += max(0.0, start - busy_until)
        busy_until = max(busy_until, end)
    return idle


def _wait_hit(site: Site, path_qs: str) -> None:
    deadline = time.monotonic() + 30
    while math.isnan(site.first_hit(path_qs)) and time.monotonic() < deadline:
        time.sleep(0.01)


def _spans(site: Site) -> list[tuple[str, float, float]]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{site.host}:{site.port}/_spans", timeout=10) as resp:
        return json.loads(resp.read())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--targets", type=int, default=4)
    args = ap.parse_args()
    site = Site(pages=8, hosts=2).start()
    try:
        rows, idle = [], []
        for r in range(args.rounds):
            during, alone = one_round(site, args.targets, f"r{r}")
            idle.append(during - alone)
            ms = (
                f"{during * 1000:.1f} ms − {alone * 1000:.1f} ms = {(during - alone) * 1000:.1f} ms"
            )
            rows.append((f"round {r}: gaps while slow − gaps alone", ms))
        rows.append(
            ("median idle while work was ready (goal < 50 ms)", f"{median(idle) * 1000:.1f} ms")
        )
        show(f"the drain's idle time while work is ready, {2 * args.targets} targets", rows)
    finally:
        site.stop()


if __name__ == "__main__":
    main()
