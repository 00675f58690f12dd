"""Long content as pages: every tool answer fits in `max_length` characters, all of it.

The reference MCP fetch server's convention: a call returns at most `max_length` characters
starting at `start_index`, and says which `start_index` continues. Here the bound covers the
whole answer (the heading line and the continuation note included), so a host can trust it
when budgeting a model's context. Reading page after page with the `start_index` each note
names yields the document exactly, with nothing skipped or repeated.
"""

from __future__ import annotations

MAX_LENGTH_MIN = 1_000  # room for the heading and the note with content to spare
MAX_LENGTH_MAX = 100_000  # the server's own output cap (fetch.output_cap default)
MAX_LENGTH_DEFAULT = 20_000
SHOWN = 300  # characters of a title or URL shown in a heading or summary


class PastTheEnd(ValueError):
    """start_index is at or beyond the end of the document."""


def clip(text: str, limit: int = SHOWN) -> str:
    """`text` on one line, at most `limit` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def page(heading: str, document: str, start_index: int, max_length: int, again: str) -> str:
    """`heading`, then `document` from `start_index`, then how to continue, in `max_length`.

    `again` names the call that continues (e.g. "fetch with the same arguments").
    """
    total = len(document)
    if start_index > 0 and start_index >= total:
        raise PastTheEnd(
            f"start_index {start_index} is past the end: the content has {total} characters"
        )
    heading = heading.rstrip("\n")
    if len(heading) > max_length // 2:  # content always has room, whatever the heading says
        heading = heading[: max_length // 2 - 1] + "…"
    head = heading + "\n\n" if heading else ""
    # The note's two numbers are each at most `total`; "0 more … start_index=total" is the
    # widest but for the digits of the first, counted here.
    widest = len(_note(total, total, again)) + len(str(total)) - 1
    room = max_length - len(head) - widest
    if room <= 0:
        raise ValueError(f"max_length {max_length} leaves no room for content")
    end = min(total, start_index + room)
    body = document[start_index:end]
    tail = _note(end, total, again) if end < total else ""
    return head + body + tail


def _note(end: int, total: int, again: str) -> str:
    return (
        f"\n\n[{total - end} more characters of {total}: call {again} and "
        f"start_index={end} to continue]"
    )
