"""`sift mcp`: serve Sift's tools to an agent host over stdio (docs/MCP.md).

The SDK is an optional extra, so the verb says how to install it rather than failing on an
import; a missing SIFT_KEY or a bad SIFT_URL stops it at once with one line on stderr, which
hosts show in their server log.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

HELP = "run the MCP server over stdio, for agent hosts (docs/MCP.md)"
EPILOG = """environment:
  SIFT_URL   the API's base URL (default http://127.0.0.1:8077)
  SIFT_KEY   the API key every tool call uses (create one with 'sift keys add NAME')

example:
  SIFT_URL=http://127.0.0.1:8077 SIFT_KEY=sk-sift-… sift mcp"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "mcp",
        help=HELP,
        description=HELP[:1].upper() + HELP[1:] + ".",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None:
        print("sift: the MCP server needs the mcp extra: pip install 'sift[mcp]'", file=sys.stderr)
        return 2
    from sift.client import ConfigError
    from sift.mcp_server.main import run as serve

    try:
        serve()
    except ConfigError as e:
        print(f"sift: {e}", file=sys.stderr)
        return 2
    return 0
