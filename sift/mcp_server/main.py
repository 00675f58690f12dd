"""Runs the MCP server on stdin/stdout until the host closes it."""

from __future__ import annotations

from sift.client import AsyncClient
from sift.mcp_server.tools import build


def run(url: str | None = None, key: str | None = None) -> None:
    """Serve over stdio; `url`/`key` default to SIFT_URL/SIFT_KEY (a `ConfigError` if unusable)."""
    build(AsyncClient(url, key)).run("stdio")
