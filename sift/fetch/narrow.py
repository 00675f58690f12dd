"""A target's content from its step to what the caller gets: grep, the question's passages,
the output cap (docs/API.md §POST /v1/fetch applies them in that order).

`made` runs in the render child right after the step that made the content (the render, the
PDF's text), so the child sends back the content already narrowed and cut to the output cap,
or a question's passages: a reply is bounded by the output cap whatever the page, and a whole
page never travels to the serving process and back for its grep (docs/SECURITY.md §What one
target in flight holds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sift.config import DigestConfig
from sift.fetch import cap, digest, grep, pdf


@dataclass(frozen=True, slots=True)
class Want:
    """What the target asks of its content, and the cap it gets."""

    grep: str | None
    question: str | None
    digest: DigestConfig | None  # with a question only
    output_cap: int


@dataclass(frozen=True, slots=True)
class Narrowed:
    """The step's result with its content taken out (`made`: a `Rendered` or a `PdfText`),
    and the content as the caller gets it: after grep, and cut to the output cap unless a
    question's answer takes its place (`asked`: the passages, whether they match, the digest's
    cache key; the content is then empty)."""

    made: Any
    content: str
    truncated: bool
    hint: str | None
    matches: int | None  # grep's matching lines; None without grep
    asked: tuple[list[str], bool, str] | None


def made(step: Callable, want: Want, *args) -> Narrowed:
    """`step(*args)`, narrowed: what a render child runs for a page or a PDF (the arguments
    stay flat, so the body among them travels out of band)."""
    return narrow(step(*args), want)


def narrow(result: Any, want: Want) -> Narrowed:
    """`result` (a result dataclass with a `content` field) narrowed by `want`."""
    content = result.content
    matches = None
    if want.grep:
        found = grep.grep(content, want.grep)
        content, matches = found.content, found.matches
    head = replace(result, content="")
    if want.question and want.digest is not None:
        asked = digest.prepare(content, want.question, want.digest)
        return Narrowed(head, "", False, None, matches, asked)
    capped = cap.apply_cap(content, want.output_cap, is_pdf=isinstance(result, pdf.PdfText))
    return Narrowed(head, capped.content, capped.truncated, capped.hint, matches, None)


@dataclass(frozen=True, slots=True)
class Text:
    """Content with nothing else to carry (a jq program's output)."""

    content: str
