"""The `sift` command: server, keys and client verbs."""

from sift.cli.main import main

__all__ = ["main"]
