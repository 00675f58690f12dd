"""Writing to stdout so that a reader who goes away (`| head`) is noticed at once.

One large `write` to a pipe whose reader closes can come back short without an error, and the
rest is then silently lost; writing in pipe-sized pieces and flushing each makes the next piece
raise `BrokenPipeError`, which `sift.cli.main` turns into a quiet exit 141.

On a terminal, every C0 control character except newline and tab, DEL and every C1 control is
written as a visible `\\u00XX` escape: page content could otherwise write the clipboard
(OSC 52), set the window title (OSC 0), clear the screen or plant hidden links (OSC 8) on the
reader's terminal (docs/SECURITY.md §Terminal output). The escape is also valid inside a JSON
string, so `--json` on a terminal stays JSON. Written to a file or a pipe, the text is left as
it is. The same holds for the `sift: …` lines on stderr (`note`): a server's error line or a
result's note can quote what a page or its headers said.
"""

from __future__ import annotations

import json
import re
import sys

PIECE = 16384
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with its terminal controls (all but newline and tab) escaped as `\\u00XX`."""
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def for_stream(text: str, stream) -> str:
    """`text` as it may be written to `stream`: escaped when the stream is a terminal."""
    return visible(text) if stream.isatty() else text


def note(text: str) -> None:
    """One `sift: TEXT` line on stderr."""
    print(for_stream(f"sift: {text}", sys.stderr), file=sys.stderr, flush=True)


def emit(text: str) -> None:
    out = sys.stdout
    text = for_stream(text, out)
    for start in range(0, len(text), PIECE):
        out.write(text[start : start + PIECE])
        out.flush()


def emit_json(value) -> None:
    emit(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
