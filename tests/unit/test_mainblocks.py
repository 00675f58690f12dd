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
