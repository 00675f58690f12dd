"""`sift mcp`: serve Sift's tools to an agent host over stdio (docs/MCP.md).

The SDK is an optional extra, so the verb says how to install it rather than failing on an
import; a missing SIFT_KEY or a bad SIFT_URL stops it at once with one line on stderr, which
hosts show in their server log. `--print-config` writes the host configuration instead, with
the absolute path of this very `sift`, so a host that lacks the venv on its PATH finds it.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

HELP = "run the MCP server over stdio, for agent hosts (docs/MCP.md)"
EPILOG = """environment:
  SIFT_URL   the API's base URL (default http://127.0.0.1:8077)
  SIFT_KEY   the API key every tool call uses (create one with 'sift keys add NAME')

example:
  SIFT_URL=http://127.0.0.1:8077 SIFT_KEY=sk-sift-… sift mcp
  sift mcp --print-config        # the host configuration to paste, for this SIFT_URL/SIFT_KEY"""
KEY_PLACEHOLDER = "sk-sift-…"


def add_parser(sub) -> None:
    p = sub.add_parser(
        "mcp",
        help=HELP,
        description=HELP[:1].upper() + HELP[1:] + ".",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--print-config",
        nargs="?",
        const="json",
        choices=("json", "toml"),
        metavar="FORMAT",
        help="print a host configuration that starts this server (json: an mcpServers map, "
        "the default; toml: an mcp_servers table) with SIFT_URL and SIFT_KEY, then exit",
    )
    p.set_defaults(run=run)


def command_path() -> str:
    """The absolute path of the `sift` command beside this Python (the venv's), else the one on
    PATH, else plain `sift`."""
    beside = Path(os.path.abspath(sys.executable)).parent / "sift"
    if beside.is_file():
        return str(beside)
    return shutil.which("sift") or "sift"


def host_config(url: str, key: str, fmt: str = "json") -> str:
    """A host configuration entry named `sift` (docs/MCP.md §Host configuration)."""
    command = command_path()
    if fmt == "toml":
        q = functools.partial(json.dumps, ensure_ascii=False)  # a JSON string is a TOML string
        return (
            f'[mcp_servers.sift]\ncommand = {q(command)}\nargs = ["mcp"]\n'
            f"env = {{ SIFT_URL = {q(url)}, SIFT_KEY = {q(key)} }}\n"
        )
    entry = {"command": command, "args": ["mcp"], "env": {"SIFT_URL": url, "SIFT_KEY": key}}
    return json.dumps({"mcpServers": {"sift": entry}}, indent=2, ensure_ascii=False) + "\n"


def print_config(fmt: str) -> int:
    from sift.client.calls import endpoint
    from sift.client.errors import ConfigError
    from sift.constants import DEFAULT_URL

    url = os.environ.get("SIFT_URL") or DEFAULT_URL
    key = os.environ.get("SIFT_KEY") or ""
    try:
        url = endpoint(url, key or KEY_PLACEHOLDER).base  # the checks `sift mcp` makes at start
    except ConfigError as e:
        print(f"sift: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(host_config(url, key or KEY_PLACEHOLDER, fmt))
    if not key:
        print(
            f"sift: SIFT_KEY is not set: replace {KEY_PLACEHOLDER} with a key "
            "('sift keys add NAME' makes one)",
            file=sys.stderr,
        )
    return 0


def missing_extra() -> str:
    """What to run when the SDK is missing: the install names the checkout Sift runs from (or
    the wheel it came from), never a bare name from the index, where `sift` is another project
    (docs/OPERATIONS.md §Installing)."""
    python = sys.executable
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file():
        how = f"{python} -m pip install -e '{root}[mcp]'"
    else:
        how = f"{python} -m pip install 'PATH[mcp]' with PATH the checkout or wheel it came from"
    return (
        f"sift: the MCP server needs Sift's mcp extra; install it with: {how} "
        "(not 'pip install sift': that name on the package index is an unrelated project)"
    )


def run(args: argparse.Namespace) -> int:
    if args.print_config:
        return print_config(args.print_config)
    if importlib.util.find_spec("mcp") is None:
        print(missing_extra(), file=sys.stderr)
        return 2
    from sift.client import ConfigError
    from sift.mcp_server.main import run as serve

    try:
        serve()
    except ConfigError as e:
        print(f"sift: {e}", file=sys.stderr)
        return 2
    return 0
