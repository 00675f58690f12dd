"""`sift fetch URL`: one interactive fetch, content on stdout and notes on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sift.cli import client, exits
from sift.cli.stdout import emit, emit_json

OPTIONS = (
    *("mode", "question", "pages", "grep", "jq", "context", "recover", "links", "images"),
    "max_age",
    "accept_verdicts",
)


def fetch(args: argparse.Namespace) -> int:
    target: dict[str, Any] = {"url": args.url}
    for name in OPTIONS:
        value = getattr(args, name)
        if value is not None:
            target[name] = value
    body = client.fetch(target)
    if args.json:
        emit_json(body)
        return exits.OK
    content = body.get("content", "")
    if content:
        emit(content + "\n")
    if body.get("verdict") not in (None, "ok"):
        print(f"sift: verdict {body['verdict']}", file=sys.stderr)
    if body.get("note"):
        print(f"sift: {body['note']}", file=sys.stderr)
    if body.get("truncated"):
        print("sift: content truncated; narrow with --grep, --question or --pages", file=sys.stderr)
    return exits.OK
