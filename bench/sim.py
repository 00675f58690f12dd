"""The scheduler's simulation at volume (docs/WORKER.md §The scheduler's guarantees): seeded
random runs of tests/sim.py, every guarantee checked after every event (tests/simcheck.py),
over the general workloads and the hostile load's shape (`--shape attack`, tests.sim.attack).

Prints runs per second, so CI's share (`SIFT_SIM_RUNS`, 2,000 by default) is known, and the
first failing seed's minimal workload and trace, if any.

    .venv/bin/python bench/sim.py [--runs 20000] [--first 0] [--shape workload|attack]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import show
from tests.sim import attack, workload
from tests.simcheck import report, simulate


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--shape", choices=("workload", "attack"), default="workload")
    args = ap.parse_args()
    events = broken = 0
    t0 = time.perf_counter()
    for seed in range(args.first, args.first + args.runs):
        setup, subs = {"workload": workload, "attack": attack}[args.shape](random.Random(seed))
        sim, error = simulate(setup, subs)
        events += len(sim.trace)
        if error and not broken:
            print(report(seed, setup, subs))
        broken += bool(error)
    seconds = time.perf_counter() - t0
    show(
        f"simulation ({args.shape}), seeds {args.first}–{args.first + args.runs - 1}",
        [
            ("runs", str(args.runs)),
            ("runs per second", f"{args.runs / seconds:.0f}"),
            ("traced events per run (mean)", f"{events / args.runs:.0f}"),
            ("runs that broke a guarantee", str(broken)),
        ],
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
