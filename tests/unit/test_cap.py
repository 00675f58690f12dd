"""The output cap: cut at a clean boundary, say so, and say how to narrow."""

from __future__ import annotations

from sift.fetch.cap import apply_cap, boundary


def test_content_within_the_cap_is_untouched():
    assert apply_cap("short", 100) == ("short", False, None)
    assert apply_cap("x" * 100, 100) == ("x" * 100, False, None)


def test_cut_content_fits_the_cap_marker_included():
    text = "\n\n".join(f"Paragraph {i} " + ("word " * 40).strip() for i in range(200))
    out, truncated, _ = apply_cap(text, 5000)
    assert truncated
    assert len(out) <= 5000


def test_cut_falls_at_a_paragraph_break():
    text = "\n\n".join(f"Paragraph {i} " + ("word " * 40).strip() for i in range(200))
    out, _, _ = apply_cap(text, 5000)
    kept = out.rsplit("\n\n", 1)[0]
    assert text.startswith(kept)
    assert text[len(kept) : len(kept) + 2] == "\n\n"


def test_cut_falls_at_a_line_break_when_there_is_no_paragraph():
    text = "\n".join(f"line {i} " + "x" * 30 for i in range(1000))
    out, _, _ = apply_cap(text, 2000)
    kept = out.rsplit("\n\n", 1)[0]
    assert text[len(kept)] == "\n"


def test_cut_never_splits_a_word_when_a_space_is_near():
    text = "abcdefghij " * 1000
    kept = apply_cap(text, 1000).content.rsplit("\n\n", 1)[0]
    assert kept.endswith("abcdefghij")


def test_cut_never_separates_a_combining_mark_from_its_letter():
    text = "e\u0301" * 1000  # é as e + combining acute, no spaces or newlines
    cut = boundary(text, 501)
    assert text[cut - 1] == "\u0301"


def test_open_code_fence_is_closed():
    text = "Intro\n\n```python\n" + "\n".join(f"x = {i}" for i in range(2000)) + "\n```\n"
    out, _, _ = apply_cap(text, 1000)
    body = out.rsplit("\n\n", 1)[0]
    assert body.endswith("\n```")
    assert sum(1 for line in body.split("\n") if line.startswith("```")) == 2


def test_marker_says_what_was_kept_and_how_to_narrow():
    text = "word " * 10000
    out, _, hint = apply_cap(text, 1000)
    last = out.rsplit("\n", 1)[-1]
    assert last.startswith("[truncated: ")
    assert f"of {len(text)} characters shown" in last
    assert "grep or question" in last
    assert hint == "grep"


def test_pdf_hint_is_pages():
    out, _, hint = apply_cap("page text " * 5000, 1000, is_pdf=True)
    assert hint == "pages"
    assert "narrow with pages, grep or question" in out


def test_tiny_cap_still_bounds_the_content():
    out, truncated, _ = apply_cap("y" * 1000, 100)
    assert truncated
    assert len(out) <= 100
