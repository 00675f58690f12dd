"""Starting Sift's real processes, for tests and benchmarks: one config writer, one launcher.

Every test tier and `bench/` start `sift serve` and `sift-worker` through `spawn`, with a
config written by `write_config`, so the TOML, the environment (no inherited `SIFT_*` or proxy
variables; the repository on `PYTHONPATH`) and the command lines live in one place.

`spawn("worker", …, sleep=S)` starts the real worker process with a fetch of the tests' own
(`tests.sleepy_worker`): each target sleeps S seconds and answers a small envelope, so process
tests control timing without a network. The product carries no switch for this: the seam is
`worker.main.main(argv, fetch=…)`, and only this harness calls it with a fetch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import tomli_w

ROOT = Path(__file__).resolve().parent.parent

_COMMANDS = {"api": ["-m", "sift", "serve"], "worker": ["-m", "worker.main"]}
_DROPPED_ENV = ("SIFT_", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY")


def write_config(
    path: Path,
    *,
    state_dir: Path | str,
    port: int | None = None,
    site_ports: Sequence[int] = (),
    **blocks: Mapping[str, Any],
) -> Path:
    """A config for one test or bench run: loopback only, the given state dir and API port,
    `site_ports` reachable on 127.0.0.1, plus any other blocks (`batch={…}`, `log={…}`)."""
    cfg: dict[str, dict[str, Any]] = {"store": {"state_dir": str(state_dir)}}
    if port is not None:
        cfg["server"] = {"host": "127.0.0.1", "port": port}
    if site_ports:
        cfg["guard"] = {"allow_networks": ["127.0.0.1/32"], "allowed_ports": sorted(site_ports)}
    for name, values in blocks.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    path.write_text(tomli_w.dumps(cfg), encoding="utf-8")
    return path


def update_config(path: Path, **blocks: Mapping[str, Any]) -> Path:
    """Merge `blocks` into the config at `path` (a restarted process reads the new values)."""
    cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    for name, values in blocks.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    path.write_text(tomli_w.dumps(cfg), encoding="utf-8")
    return path


def env(config: Path | None = None) -> dict[str, str]:
    """The environment a started process gets: ours without `SIFT_*` and proxy variables."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_ENV)}
    out["PYTHONPATH"] = str(ROOT)
    if config is not None:
        out["SIFT_CONFIG"] = str(config)
    return out


def command(role: str, config: Path | None = None, *, sleep: float | None = None) -> list[str]:
    """The command line of `role` (`api` or `worker`); `sleep` swaps the worker's fetch."""
    args = list(_COMMANDS[role])
    if sleep is not None:
        assert role == "worker", "only the worker fetches"
        args = ["-m", "tests.sleepy_worker", "--sleep", str(sleep)]
    if config is not None:
        args += ["--config", str(config)]
    return [sys.executable, *args]


def spawn(
    role: str,
    config: Path,
    *,
    sleep: float | None = None,
    stdout: IO | int | None = subprocess.DEVNULL,
    stderr: IO | int | None = subprocess.STDOUT,
    wrap: Sequence[str] = (),
) -> subprocess.Popen:
    """Start `role` on `config`; the caller owns the process (stop it by its PID)."""
    return subprocess.Popen(
        [*wrap, *command(role, config, sleep=sleep)],
        cwd=ROOT,
        env=env(config),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
    )
