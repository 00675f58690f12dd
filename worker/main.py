"""`sift-worker [--config FILE]`: the batch worker process.

Exit codes: 0 after a requested stop (SIGTERM/SIGINT), 1 when a part of the worker died, 2 when
it cannot start (bad config, state dir missing or not writable, socket path unusable) — with
one line on stderr saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from sift import config, log
from sift.config import ConfigError
from sift.nudge import SocketPathError
from sift.statedir import make_private
from sift.store import StoreError
from worker.process import Worker

EXIT_USAGE = 2


def state_dir_problem(state_dir: Path) -> str | None:
    """Why the worker cannot use `state_dir`, or None."""
    if state_dir.exists() and not state_dir.is_dir():
        return f"state dir {state_dir} is not a directory (set [store] state_dir)"
    if not state_dir.is_dir():
        return f"state dir {state_dir} does not exist (create it, or set [store] state_dir)"
    if not os.access(state_dir, os.W_OK | os.X_OK):
        return f"state dir {state_dir} is not writable by this user"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sift-worker", description="Drain Sift's batch jobs (one active worker per state dir)."
    )
    parser.add_argument("--config", help="config file (default: $SIFT_CONFIG, else built-ins)")
    args = parser.parse_args(argv)
    try:
        cfg = config.load(args.config)
    except ConfigError as e:
        return fail(str(e))
    problem = state_dir_problem(cfg.state_dir)
    if problem:
        return fail(problem)
    make_private(cfg.state_dir)
    log.setup(cfg.log.level, cfg.log.format)
    try:
        return asyncio.run(Worker(cfg).run())
    except (ConfigError, SocketPathError, StoreError) as e:
        return fail(str(e))


def fail(message: str) -> int:
    print(f"sift-worker: {message}", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
