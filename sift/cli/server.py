"""`sift serve` and `sift up`: the verbs that run the server side."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

from sift import config as configmod
from sift import log as logmod
from sift import statedir
from sift.auth import KeyRing, KeysError, add_key
from sift.cli import mcp
from sift.statedir import make_private


class ServerError(Exception):
    """A start-up problem, reported as one line."""

    exit_code = 2


def load_config(path: str | None) -> configmod.Config:
    try:
        return configmod.load(path)
    except configmod.ConfigError as e:
        raise ServerError(str(e)) from None


def check_state_dir(state_dir: Path) -> None:
    """Fail early and clearly on a missing or read-only state dir."""
    from sift.store import state_dir_problem  # the store's engines load only for server verbs

    problem = state_dir_problem(state_dir)
    if problem:
        raise ServerError(problem)


def serve(args: argparse.Namespace) -> int:
    from sift.api import listener
    from sift.api.app import create_app
    from sift.store import StoreError, open_store

    cfg = load_config(args.config)
    if args.host or args.port is not None:
        cfg = replace(
            cfg,
            server=replace(
                cfg.server,
                host=args.host or cfg.server.host,
                port=cfg.server.port if args.port is None else args.port,
            ),
        )
    logmod.setup(cfg.log.level, cfg.log.format)
    statedir.create(cfg.state_dir)
    check_state_dir(cfg.state_dir)
    make_private(cfg.state_dir)
    try:
        open_store(cfg).close()
        KeyRing.load(cfg.keys_file)
    except (StoreError, KeysError) as e:
        raise ServerError(str(e)) from None
    app = create_app(cfg)
    print(
        f"sift: API listening on http://{cfg.server.host}:{cfg.server.port}",
        file=sys.stderr,
        flush=True,
    )
    listener.run(app, cfg.server)
    return 0


def up(args: argparse.Namespace) -> int:
    """API and worker as two child processes; stops both on Ctrl-C, fails if either dies."""
    cfg = load_config(args.config)
    statedir.create(cfg.state_dir)
    check_state_dir(cfg.state_dir)
    make_private(cfg.state_dir)
    key = _first_key(cfg)
    env = dict(os.environ)
    env["SIFT_CONFIG"] = str(Path(args.config).resolve()) if args.config else ""
    cwd = os.getcwd()
    procs = {
        "api": subprocess.Popen([sys.executable, "-m", "sift", "serve"], env=env, cwd=cwd),
        "worker": subprocess.Popen([sys.executable, "-m", "worker.main"], env=env, cwd=cwd),
    }
    _greet(cfg, key)
    failed = _supervise(procs, grace=cfg.batch.grace + 5)
    if failed:
        print(
            f"sift: {failed} exited with code {procs[failed].returncode}; stopped both",
            file=sys.stderr,
        )
        return 1
    return 0


def _first_key(cfg: configmod.Config) -> str | None:
    """An `admin` key when the keys file has none yet (shown once), else None."""
    try:
        ring = KeyRing.load(cfg.keys_file)
        return add_key(cfg.keys_file, "admin") if len(ring) == 0 else None
    except KeysError as e:
        raise ServerError(str(e)) from None


def _greet(cfg: configmod.Config, key: str | None) -> None:
    url = f"http://{cfg.server.host}:{cfg.server.port}"
    print(f"sift: API at {url}, worker started (state dir {cfg.state_dir})", flush=True)
    if key:
        print("sift: first API key (shown once; more with 'sift keys add NAME'):")
        print(f"  export SIFT_URL={url} SIFT_KEY={key}")
        cli = mcp.command_path()  # works without an active venv
        print("sift: try a batch (paste the export line first):")
        print(f"  printf 'https://example.org/\\nhttps://example.com/\\n' | {cli} batch submit -")
        print(f"  {cli} batch status JOB_ID --wait")
        print("sift: MCP host configuration (an mcpServers entry; docs/MCP.md):")
        print(textwrap.indent(mcp.host_config(url, key), "  "), end="")
    else:
        cli = mcp.command_path()
        print(f"sift: MCP host configuration: SIFT_URL={url} SIFT_KEY=… {cli} mcp --print-config")
    sys.stdout.flush()


def _supervise(procs: dict[str, subprocess.Popen], *, grace: float) -> str | None:
    """Wait for a stop signal or a child's exit, then stop both children (SIGTERM, then a kill
    after `grace`); returns the name of the child that exited on its own, if one did."""
    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    failed = None
    while stop["signal"] is None and failed is None:
        for name, p in procs.items():
            if p.poll() is not None:
                failed = name
        time.sleep(0.2)
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs.values():
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return failed
