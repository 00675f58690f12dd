"""Writing to stdout so that a reader who goes away (`| head`) is noticed at once.

One large `write` to a pipe whose reader closes can come back short without an error, and the
rest is then silently lost; writing in pipe-sized pieces and flushing each makes the next piece
raise `BrokenPipeError`, which `sift.cli.main` turns into a quiet exit 141.
"""

from __future__ import annotations

import json
import sys

PIECE = 16384


def emit(text: str) -> None:
    out = sys.stdout
    for start in range(0, len(text), PIECE):
        out.write(text[start : start + PIECE])
        out.flush()


def emit_json(value) -> None:
    emit(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
