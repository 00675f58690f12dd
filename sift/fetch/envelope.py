"""The one place where the success envelope's values get their size caps (docs/SECURITY.md
§Values taken from pages).

Every field of the envelope is registered in `FIELDS` with the bound its value keeps, and
`bounded` applies them all as the last step of every fetch (`Pipeline.fetch_target`, which
`/v1/fetch`, the worker and the MCP server all go through). A field that is not registered is
a programming error (`UnregisteredField`), so a new field cannot reach a caller, a database row
or a status reply without a cap: a 9 MB `<link rel=canonical>` is dropped here, whichever
extractor read it. A new field (or `metadata` key) is one entry in `FIELDS` and one row in
docs/API.md §Success envelope; tests/attack/test_caps_envelope.py checks both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sift.fetch.cap import apply_cap
from sift.guard.url import MAX_URL_LENGTH

ELLIPSIS = "…"
_SURROGATE = re.compile("[\ud800-\udfff]")


def well_formed(text: str) -> str:
    """`text` as UTF-8 can carry it: lone surrogates (which JSON's `\\uXXXX` escapes can spell)
    become U+FFFD, so no reply, row or log line is unencodable."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


class UnregisteredField(RuntimeError):
    """An envelope field has no cap registered in `sift.fetch.envelope.FIELDS`."""


@dataclass(frozen=True, slots=True)
class Text:
    """A string cut to `limit` characters (with an ellipsis), or None/`""` when it may not be
    cut: a URL cut short is another URL, so an over-long one is dropped instead."""

    limit: int
    url: bool = False

    def bound(self, value: Any, output_cap: int) -> Any:
        if not isinstance(value, str):
            return value
        value = well_formed(value)
        if len(value) <= self.limit:
            return value
        if self.url:
            return None
        return value[: self.limit - 1] + ELLIPSIS


@dataclass(frozen=True, slots=True)
class Content:
    """The page's content: at most `[fetch] output_cap` characters (`cap.apply_cap` cut it at
    a readable place before; this only makes sure)."""

    def bound(self, value: Any, output_cap: int) -> Any:
        if not isinstance(value, str):
            return value
        return apply_cap(well_formed(value), output_cap).content


@dataclass(frozen=True, slots=True)
class Scalar:
    """A boolean or a number: fixed size."""

    def bound(self, value: Any, output_cap: int) -> Any:
        if value is not None and not isinstance(value, (bool, int, float)):
            raise TypeError(f"expected a number or a boolean, got {type(value).__name__}")
        return value


@dataclass(frozen=True, slots=True)
class Items:
    """A list of at most `count` values, each bounded by `each`."""

    count: int
    each: Text

    def bound(self, value: Any, output_cap: int) -> Any:
        if not isinstance(value, list):
            return value
        return [self.each.bound(v, output_cap) for v in value[: self.count]]


@dataclass(frozen=True, slots=True)
class Record:
    """An object whose keys are registered too."""

    fields: dict[str, Any]

    def bound(self, value: Any, output_cap: int) -> Any:
        if not isinstance(value, dict):
            return value
        return _bound_all(value, self.fields, output_cap)


URL = Text(MAX_URL_LENGTH, url=True)
SHORT = Text(300)  # the title and the short metadata fields (pagemeta.FIELD_MAX)
TOKEN = Text(64)  # values Sift chooses: a mode, a source, a time, a hint
CONTEXT_PASSAGE = 5000  # characters of one `context` passage
CONTEXT_PASSAGES = 50  # the most `[digest] passages` allows

FIELDS: dict[str, Any] = {
    "success": Scalar(),
    "url": URL,
    "final_url": URL,
    "status": Scalar(),
    "content_type": Text(255),  # RFC 6838: 127 characters each for type and subtype
    "title": SHORT,
    "metadata": Record(
        {
            "title": SHORT,
            "description": Text(1000),  # pagemeta.DESCRIPTION_MAX
            "author": SHORT,
            "published": TOKEN,
            "language": TOKEN,
            "site_name": SHORT,
            "canonical_url": URL,
        }
    ),
    "mode": TOKEN,
    "verdict": TOKEN,  # one of sift.fetch.verdict's names
    "content": Content(),
    "truncated": Scalar(),
    "chars": Scalar(),
    "bytes": Scalar(),
    "hint": TOKEN,
    "pages": Record({"total": Scalar(), "returned": Text(1000)}),
    "matches": Scalar(),
    "note": Text(500),
    "answer_by": Text(200),
    "context": Items(CONTEXT_PASSAGES, Text(CONTEXT_PASSAGE)),
    "cached": Scalar(),
    "source": TOKEN,
    "fetched_at": TOKEN,
    "archived_at": TOKEN,
}


def bounded(envelope: dict[str, Any], output_cap: int) -> dict[str, Any]:
    """`envelope` with every value within its registered cap and every string well formed
    (`chars` recounted);
    `UnregisteredField` for a field `FIELDS` does not name."""
    out = _bound_all(envelope, FIELDS, output_cap)
    if isinstance(out.get("content"), str):
        out["chars"] = len(out["content"])
    return out


def _bound_all(values: dict[str, Any], caps: dict[str, Any], output_cap: int) -> dict[str, Any]:
    out = {}
    for key, value in values.items():
        cap = caps.get(key)
        if cap is None:
            raise UnregisteredField(f"envelope field {key!r} has no cap in envelope.FIELDS")
        out[key] = cap.bound(value, output_cap)
    return out
