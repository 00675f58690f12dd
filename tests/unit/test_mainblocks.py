"""Matching the page's runs to the extractor's text (docs/EXTRACTION.md §How `clean` keeps
links, images and code): the work stays linear whatever the page repeats."""

from __future__ import annotations

import gc
import random
import time

import lxml.etree
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


def _vocabulary_page(seed: int) -> tuple[str, str]:
    """A page whose article and comments draw on one small vocabulary (the bench articles' worst
    case for matching), and the text an extractor keeps of it: the article alone."""
    import random

    rnd = random.Random(seed)
    vocab = [f"w{i}" for i in range(30)]

    def para() -> str:
        return " ".join(rnd.choice(vocab) for _ in range(rnd.randint(12, 24)))

    article = [para() for _ in range(12)]
    comments = [para() for _ in range(10)]
    body = "".join(f"<p>{p}</p>" for p in article)
    body += "".join(f'<div class="c"><b>r{i}</b><p>{c}</p></div>' for i, c in enumerate(comments))
    return f"<html><body><article>{body}</article></body></html>", "\n".join(article)


def test_the_text_shingle_set_turns_away_the_same_shingles_the_lookups_would(monkeypatch):
    """Once misses cost enough, a set of the text's shingles answers for the lookups of shingles
    the text lacks: the same runs are kept as with the lookups alone."""
    for seed in range(3):
        kept = []
        for share in (0, mainblocks.MISSED_SHARE):  # 0: the set is never built
            monkeypatch.setattr(mainblocks, "MISSED_SHARE", share)
            html, extracted = _vocabulary_page(seed)
            root = lxml.html.fromstring(html).find("body")
            runs = mainblocks._runs(root)
            text = mainblocks._Text(mainblocks._answer_key(extracted), runs)
            mainblocks._pin(runs, text)
            assert (text.grams is not None) == bool(share)
            kept.append([(run.keep, run.span) for run in runs])
        assert kept[0] == kept[1]
        assert sum(keep for keep, _ in kept[0]) == 12


def test_a_render_leaves_no_reference_cycles_holding_the_page():
    """docs/EXTRACTION.md §How `clean` keeps links, images and code: the page's tree and the
    runs are freed when the render returns, not at the collector's next full pass."""
    para = "<p>The river rose in the night and the town woke to water in its streets {}.</p>"
    body = "".join(para.format(i) for i in range(40))
    html = "<html><head><title>Flood</title></head><body><nav><a href='/'>Home</a></nav>"
    html += f"<article><h1>Flood</h1><div><section>{body}</section></div></article></body></html>"
    gc.collect()
    gc.disable()
    try:
        for mode in ("clean", "text", "markdown", "links"):
            assert render("html", html, mode, "https://x.example/a").content
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, (lxml.etree._Element, mainblocks._Run))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


def test_the_next_free_place_of_a_shingle_is_the_one_lookups_asked_again_would_find():
    """`_Text.free` finds, in one loop, what `occurs` asked again after each taken place
    finds, with the same places tried and the same cost counted, also when the work budget
    runs out on the way."""
    rng = random.Random(7)
    for trial in range(200):
        key = [rng.choice("ab") for _ in range(rng.randint(8, 120))]
        shingle = [rng.choice("ab") for _ in range(mainblocks.SHINGLE)]
        start, tries = rng.randint(0, len(key)), rng.choice((1, 2, 5, mainblocks.SHINGLE_TRIES))
        used = bytearray(rng.random() < 0.7 for _ in key)
        budget = rng.choice((10**6, rng.randint(0, 60)))
        results = []
        for one_loop in (False, True):
            text = mainblocks._Text(key, [])
            text.used, text.budget = bytearray(used), budget
            lists = [text.where.get(word) for word in shingle]
            if None in lists:
                break
            if one_loop:
                i = text.free(shingle, lists, start, tries)
            else:
                i = text.occurs(shingle, lists, start, tries)
                while i >= 0 and text.used[i]:
                    i = text.occurs(shingle, lists, i + 1, tries)
            results.append((i, text.budget, text.missed))
        if results:
            assert results[0] == results[1], trial
