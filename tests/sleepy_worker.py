"""`python -m tests.sleepy_worker --sleep S [--config FILE]`: the real worker process, whose
fetch of each target sleeps S seconds and answers a small success envelope.

Process tests use it to control timing without a network (`tests.harness.spawn(..., sleep=S)`).
Everything else is `sift-worker` itself: the seam is `worker.main.main(argv, fetch=…)`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from sift.store import Claim
from worker.main import main as worker_main


class SleepFetch:
    def __init__(self, seconds: float):
        self.seconds = seconds

    async def __call__(self, claim: Claim) -> dict:
        await asyncio.sleep(self.seconds)
        return {"success": True, "url": claim.url, "content": "fake", "source": "test"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sleepy-worker")
    parser.add_argument("--sleep", type=float, required=True)
    args, rest = parser.parse_known_args(argv)
    return worker_main(rest, fetch=SleepFetch(args.sleep))


if __name__ == "__main__":
    sys.exit(main())
