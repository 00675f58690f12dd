"""The lines of the content that match a caller's pattern, like `grep -n -C1`.

Patterns come from callers, so they run on RE2 (google-re2): matching is linear in the input
whatever the pattern, and constructs that need backtracking (lookaround, backreferences) are
refused at compile time with RE2's message.
"""

from __future__ import annotations

from dataclasses import dataclass

import re2

from sift.errors import InvalidTarget

MAX_MATCHES = 1000  # matching lines shown at most
MAX_CONTEXT = 10
MAX_LINE = 1000  # characters of one shown line; longer lines are cut around the match
PATTERN_MAX = 4096
NO_MATCH_NOTE = "grep: no line matches the pattern; the content is empty"


@dataclass(frozen=True, slots=True)
class GrepResult:
    content: str
    matches: int  # matching lines in the whole content, including those not shown


def compile_pattern(pattern: str):
    """The compiled RE2 pattern, or InvalidTarget with RE2's own message."""
    if len(pattern) > PATTERN_MAX:
        raise InvalidTarget(f"grep: the pattern is longer than {PATTERN_MAX} characters")
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        detail = e.args[0] if e.args else "invalid pattern"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise InvalidTarget(f"grep: bad pattern: {detail}", hint="grep") from None


def grep(
    content: str, pattern: str, context: int = 1, *, max_matches: int = MAX_MATCHES
) -> GrepResult:
    """Matching lines as `12: text`, context lines as `11- text`, groups split by `--`.

    Case-sensitive unless the pattern says `(?i)`. After `max_matches` matching lines the rest
    are counted but not shown, and a last line says how many were left out.
    """
    regex = compile_pattern(pattern)
    context = max(0, min(context, MAX_CONTEXT))
    lines = content.split("\n")
    hits: list[int] = []
    starts: dict[int, int] = {}
    total = 0
    for i, line in enumerate(lines):
        m = regex.search(line)
        if m is None:
            continue
        total += 1
        if len(hits) < max_matches:
            hits.append(i)
            starts[i] = m.start()
    out: list[str] = []
    last = -1
    for i in hits:
        lo, hi = max(0, i - context), min(len(lines) - 1, i + context)
        if last >= 0 and lo > last + 1:
            out.append("--")
        for j in range(max(lo, last + 1), hi + 1):
            if j in starts:
                out.append(f"{j + 1}: {_window(lines[j], starts[j])}")
            else:
                out.append(f"{j + 1}- {_window(lines[j], 0)}")
        last = max(last, hi)
    if total > len(hits):
        out.append(f"[{total - len(hits)} more matching lines not shown; narrow the pattern]")
    return GrepResult(content="\n".join(out), matches=total)


def _window(line: str, at: int) -> str:
    """The line, or MAX_LINE characters of it around position `at` when it is longer."""
    line = line.rstrip("\r")
    if len(line) <= MAX_LINE:
        return line
    start = max(0, min(at - MAX_LINE // 4, len(line) - MAX_LINE))
    piece = line[start : start + MAX_LINE]
    return ("…" if start else "") + piece + ("…" if start + MAX_LINE < len(line) else "")
