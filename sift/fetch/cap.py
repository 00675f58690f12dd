"""Bound the content returned to `fetch.output_cap` characters, cutting where a reader would.

The cut falls at a paragraph break, else a line break, else a space near the limit, never
inside a character or before a combining mark; an open code fence is closed. A last line says
how much was kept and how to narrow the request, so an agent reading only `content` still knows
it was cut.
"""

from __future__ import annotations

import unicodedata
from typing import NamedTuple

MARKER = "[truncated: {shown} of {total} characters shown; narrow with {how}]"


class Capped(NamedTuple):
    content: str
    truncated: bool
    hint: str | None  # "pages" for a PDF, else "grep"; None when nothing was cut


def apply_cap(content: str, cap: int, *, is_pdf: bool = False) -> Capped:
    """`content` cut to at most `cap` characters (marker line included)."""
    if len(content) <= cap:
        return Capped(content, False, None)
    how = "pages, grep or question" if is_pdf else "grep or question"
    marker = MARKER.format(shown=cap, total=len(content), how=how)
    budget = cap - len(marker) - len("\n```\n\n")
    if budget < cap // 2:  # a tiny cap: no room to explain
        marker, budget = "", cap - len("\n```")
    kept = content[: boundary(content, budget)].rstrip()
    if _open_fence(kept):
        kept += "\n```"
    if marker:
        marker = MARKER.format(shown=len(kept), total=len(content), how=how)
        kept = f"{kept}\n\n{marker}"
    return Capped(kept, True, "pages" if is_pdf else "grep")


def boundary(text: str, limit: int) -> int:
    """The best place at or before `limit` to cut `text`."""
    limit = max(0, min(limit, len(text)))
    for sep, reach in (("\n\n", 0.8), ("\n", 0.8), (" ", 0.95)):
        i = text.rfind(sep, 0, limit)
        if i >= int(limit * reach):
            return i
    while 0 < limit < len(text) and unicodedata.combining(text[limit]):
        limit -= 1
    return limit


def _open_fence(text: str) -> bool:
    fences = sum(1 for line in text.split("\n") if line.lstrip().startswith("```"))
    return fences % 2 == 1
