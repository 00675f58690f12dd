"""Matching the page's runs to the extractor's text (docs/EXTRACTION.md §How `clean` keeps
links, images and code): the work stays linear whatever the page repeats."""

from __future__ import annotations

import time

import lxml.html

from sift.fetch import mainblocks
from sift.fetch.render import render


def test_a_page_that_repeats_one_word_cannot_make_matching_quadratic():
    text = " ".join(["tide"] * 20000)
    almost = lxml.html.fromstring("<div><p>x</p></div>")
    runs = []
    for words in (["tide"] * 19999 + ["ebb"], ["tide"] * 5000, ["tide"] * 7 + ["ebb"]):
        run = mainblocks._Run(almost)
        run.words = words
        run.items = [("text", almost)]
        runs.append(run)
    started = time.perf_counter()
    mainblocks.select(runs, text)
    took = time.perf_counter() - started
    started = time.perf_counter()
    mainblocks._WORD.findall(text.lower())  # one linear pass over the text, for scale
    linear = time.perf_counter() - started
    # Unbounded, the first run alone compares 20,000 words at each of 20,000 places.
    assert took < 200 * linear
    assert not runs[0].keep


def test_text_mode_code_blocks_on_a_page_full_of_repeated_lines_stay_linear():
    blocks = "<p>set x to one</p>" + ("<pre>" + "x = 1\n" * 3 + "</pre>") * 800
    html = f"<html><body><article>{blocks}</article></body></html>"
    started = time.perf_counter()
    out = render("html", html, "text", "https://x.example/").content
    took = time.perf_counter() - started
    started = time.perf_counter()
    render("html", html, "raw", "https://x.example/")  # a parse of the page, for scale
    parse = time.perf_counter() - started
    assert "x = 1" in out
    assert took < 200 * parse


def test_text_with_typographic_separators_splits_into_the_same_words_as_the_word_pattern():
    """`words` takes the byte table for text that is ASCII once its `SEPARATORS` are spaces:
    each must be a non-word character without another case, so the words are the pattern's."""
    for ch in mainblocks.SEPARATORS:
        assert not mainblocks._WORD.match(ch) and ch.lower() == ch == ch.upper(), hex(ord(ch))
    samples = [
        "It\u2019s \u201cdone\u201d \u2014 2\u00a0km\u2026 \u00a9 2025 \u2022 next \u2192",
        "l\u2019\u00e9t\u00e9 \u00ab caf\u00e9 \u00bb \u2013 \u0130stanbul \u03a3\u039f\u03a3",
        "snake_case\u2009and\u202fCamelCase\u200b\u2122 \u20ac5\u00d72",
    ]
    for s in samples:
        assert mainblocks.words(s) == mainblocks._WORD.findall(s.lower())
        assert mainblocks._answer_key(s + "\n" + s) == mainblocks._WORD.findall(
            (s + "\n" + s).lower()
        )
