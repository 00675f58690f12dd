"""`sift fetch URL`: one interactive fetch, content on stdout and notes on stderr."""

from __future__ import annotations

import argparse
from typing import Any

from sift.cli import client, exits
from sift.cli.stdout import emit, emit_json, note

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
        note(f"verdict {body['verdict']}")
    if body.get("note"):
        note(body["note"])
    if body.get("truncated"):
        note("content truncated; narrow with --grep, --question or --pages")
    return exits.OK
