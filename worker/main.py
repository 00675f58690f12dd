"""`sift-worker [--config FILE]`: the batch worker process.

Exit codes: 0 after a requested stop (SIGTERM/SIGINT), 1 when a part of the worker died, 2 when
it cannot start (bad config, state dir missing or not writable, socket path unusable) — with
one line on stderr saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from sift import config, log, memory, statedir
from sift.config import ConfigError
from sift.nudge import SocketPathError
from sift.statedir import make_private
from sift.store import StoreError, state_dir_problem
from worker.drain import FetchFn
from worker.process import Worker

EXIT_USAGE = 2


def main(argv: list[str] | None = None, *, fetch: FetchFn | None = None) -> int:
    """The process entry point; `fetch` replaces the per-target pipeline (the one seam a test
    harness uses to run the real process without a network)."""
    parser = argparse.ArgumentParser(
        prog="sift-worker", description="Drain Sift's batch jobs (one active worker per state dir)."
    )
    parser.add_argument("--config", help="config file (default: $SIFT_CONFIG, else built-ins)")
    args = parser.parse_args(argv)
    try:
        cfg = config.load(args.config)
    except ConfigError as e:
        return fail(str(e))
    statedir.create(cfg.state_dir)
    problem = state_dir_problem(cfg.state_dir)
    if problem:
        return fail(problem)
    make_private(cfg.state_dir)
    memory.keep_large_blocks_returnable()
    log.setup(cfg.log.level, cfg.log.format)
    try:
        return asyncio.run(Worker(cfg, fetch=fetch).run())
    except (ConfigError, SocketPathError, StoreError) as e:
        return fail(str(e))


def fail(message: str) -> int:
    print(f"sift-worker: {message}", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
