"""The worker knob: does a second drain task help, and does the rotation stay fair?

8 callers submit one job of N targets each (SPEC §4.3; docs/WORKER.md §The scheduler), on one
host or spread over two (jobs 0–3 on 127.0.0.1, 4–7 on 127.0.0.2: the second task must skip
past the first host's jobs to find room), with 20 and 100 ms pages, and `[batch] drain_tasks` 1
and 2. Prints the wall time from the first submit to the last job's end, the ratio
1-task time ÷ 2-task time (above 1: the second task helps), and each host's request order as the
site logged it (a letter per job). Goals: one host, ratio ≥ 0.95 (never slower: batch work
leaves one of the host's two slots to interactive fetches, so one host cannot go faster); two
hosts at 100 ms, the faster of the two about half one host's time (each job is another
caller's, so one task reaches both hosts too: a target yields its task at once to another
caller's ready job while the slow lane has a place, docs/WORKER.md §Handing off slow targets;
the ratio is then about 1, where it was 1.8–2 before that rule); round robin in every run: at
no point in a host's log has a job with targets left been served more than 2 fewer times than
another (one turn, plus the skew of submits landing while the drain is already running).

Real `sift serve` + `sift-worker` processes and real sites over loopback.

    .venv/bin/python bench/knob.py [--targets 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import string
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import Sift, Site, show
from bench.drain import JobWatch

JOBS = 8
HOSTS = ("127.0.0.1", "127.0.0.2")
LEAD_MAX = 2


def run(sites: list[Site], workers: int, n: int, tag: str) -> tuple[float, dict[str, str], int]:
    """(seconds, request order per host, largest lead) for one drain of JOBS jobs × n."""
    sift = Sift(
        [s.port for s in sites],
        guard={"allow_networks": [f"{s.host}/32" for s in sites]},
        batch={"drain_tasks": workers, "jobs_total": JOBS + 1},
        cache={"ttl": 0},
    )
    keys = [sift.add_key(f"caller{j}") for j in range(JOBS)]
    sift.start()
    try:
        watch = JobWatch(sift)
        for s in sites:  # robots.txt is read once per origin; keep it out of the timing
            warm = sift.request("POST", "/v1/batch", {"targets": [{"url": s.url(0, f"{tag}warm")}]})
            assert warm.get("success"), warm
            watch.wait_terminal(warm["job_id"])
        bodies = []
        for j in range(JOBS):
            site = sites[j * len(sites) // JOBS]
            urls = [site.url(t, f"{tag}j{j}t{t}") for t in range(n)]
            bodies.append({"targets": [{"url": u} for u in urls]})
        t0 = time.perf_counter()
        ids = []
        for j, body in enumerate(bodies):
            answer = sift.request("POST", "/v1/batch", body, key=keys[j])
            assert answer.get("success"), answer
            ids.append(answer["job_id"])
        end = max(watch.wait_terminal(job) for job in ids)
        assert all(watch.status(job) == "done" for job in ids)
        orders, lead = {}, 0
        for s in sites:
            jobs = [_job_of(p, tag) for p in s.log() if f"{tag}j" in p]
            orders[s.host] = "".join(string.ascii_uppercase[j] for j in jobs)
            lead = max(lead, _largest_lead(jobs, n))
        return end - t0, orders, lead
    finally:
        sift.stop()


def _job_of(path_qs: str, tag: str) -> int:
    query = urllib.parse.urlsplit(path_qs).query
    return int(query.removeprefix(f"{tag}j").split("t")[0])


def _largest_lead(jobs: list[int], n: int) -> int:
    """The most one job was ahead of another that still had targets left, over the log."""
    served = dict.fromkeys(set(jobs), 0)
    lead = 0
    for j in jobs:
        served[j] += 1
        left = [c for c in served.values() if c < n]
        if left:
            lead = max(lead, max(served.values()) - min(left))
    return lead


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3, help="runs per figure (best is shown)")
    args = ap.parse_args()
    n = args.targets
    fair = True
    for hosts in (1, 2):
        for delay in (0.02, 0.1):
            sites = [Site(delay=delay, pages=n, host=h).start() for h in HOSTS[:hosts]]
            try:
                best: dict[int, float] = {}
                rows = []
                for r in range(args.rounds):
                    for workers in (1, 2):
                        tag = f"r{r}w{workers}"
                        seconds, orders, lead = run(sites, workers, n, tag)
                        best[workers] = min(best.get(workers, seconds), seconds)
                        fair &= lead <= LEAD_MAX
                        for host, order in orders.items():
                            rows.append((f"order, drain_tasks={workers}, {host}", order))
                        rows.append((f"largest lead, drain_tasks={workers}", str(lead)))
                ratio = best[1] / best[2]
                goal = "≈ 1: one task reaches both hosts" if hosts == 2 else "≥ 0.95"
                show(
                    f"{JOBS} jobs × {n} targets, {hosts} host(s), {delay * 1000:g} ms pages",
                    [
                        ("drain_tasks = 1", f"{best[1]:.2f} s"),
                        ("drain_tasks = 2", f"{best[2]:.2f} s"),
                        (f"ratio 1 ÷ 2 (goal {goal})", f"{ratio:.2f}"),
                        *rows,
                    ],
                )
            finally:
                for s in sites:
                    s.stop()
    print(f"\nround robin held in every run (largest lead ≤ {LEAD_MAX}): {fair}")


if __name__ == "__main__":
    main()
