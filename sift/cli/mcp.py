"""`sift mcp`: serve Sift's tools to an agent host over stdio (docs/MCP.md).

The SDK is an optional extra, so the verb says how to install it rather than failing on an
import; a missing SIFT_KEY or a bad SIFT_URL stops it at once with one line on stderr, which
hosts show in their server log.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("mcp", help="run the MCP server over stdio (SIFT_URL, SIFT_KEY)")
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
