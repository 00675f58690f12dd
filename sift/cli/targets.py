"""Reading a targets file for `sift batch submit`. A file that cannot be read, or is not a
targets list, is a usage problem: exit 2 (docs/BATCH.md §Exit codes)."""

from __future__ import annotations

import json
import sys
from typing import Any

from sift.cli.client import ClientConfigError


def read_text(path: str) -> str:
    """The file's text; `-` is stdin."""
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ClientConfigError(f"cannot read {path}: {e.strerror}") from None


def parse_targets(text: str) -> list[Any]:
    """A JSON list, `{"targets": …}`, or one URL per line (blank lines and # comments skipped)."""
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            data = json.loads(stripped)
        except ValueError as e:
            raise ClientConfigError(f"targets file is not valid JSON: {e}") from None
        if isinstance(data, dict):
            data = data.get("targets")
        if not isinstance(data, list):
            raise ClientConfigError('expected a JSON list of targets or {"targets": [...]}')
        return [{"url": t} if isinstance(t, str) else t for t in data]
    urls = [ln.strip() for ln in text.splitlines()]
    return [{"url": u} for u in urls if u and not u.startswith("#")]
