"""Find, in the page's own tree, the content the main-content extractor chose, and cut the rest.

trafilatura decides *what* the main content is (it measured best on the data sets in
docs/EXTRACTION.md §Measured on the development set), but its output has lost link targets,
image sources, code languages and definition-list structure. So its text is used as an answer
key: the page is split into runs of inline content (what a browser would lay out as one block
of text), each run is looked up in the extractor's text, and runs not found are cut from the
tree. What remains is the original markup of the main content, for the Markdown renderer.

Long runs are found in document order, exactly or by most of their 4-word shingles (a sentence
the extractor trimmed), and pin down where they sit in the extractor's text; short runs
(headings, menu items, cells) must fill the text between two pinned runs, so a lone "Home" in a
menu cannot match the article. Runs without words (images, rules) stay when the runs on both
sides of them stay. Code blocks (`pre`), figures and blocks without blocks inside are one run
each. See docs/EXTRACTION.md §How `clean` keeps links, images and code.
"""

from __future__ import annotations

import contextlib
import re
from bisect import bisect_left
from itertools import chain

import lxml.etree
import lxml.html

SHINGLE = 4
SHORT_RUN = 6  # runs with fewer words must sit right after the previous found run
NEAR = 3  # how many extractor words may lie between the previous found run and a short one
PARTIAL_SHARE = 0.5  # share of a long run's shingles the extractor's text must hold
SAMPLE = 8  # shingles looked up first, to turn away a long run of boilerplate
TRIMMED_SHARE = 0.25  # share of a trimmed long run's shingles the unaccounted text must hold
SHINGLE_TRIES = 24  # places a shingle of a long run is tried at before it counts as missing
WORK_PER_WORD = 64  # words compared while matching, per word of the page and of the text
LOOKAHEAD = 3  # next long runs looked at before a run is pinned far ahead
RESCUE_MIN = 0  # words of the text no kept run accounts for, above which runs are rescued
MISSED_SHARE = 4  # the text's shingles are indexed once misses compared 1/this of its words

_BLOCK_TAGS_SPEC = (
    "address article aside blockquote body caption center dd details dialog dir div dl dt "
    "fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend "
    "li main menu nav ol p pre section summary table tbody td tfoot th thead tr ul"
)
BLOCK_TAGS = frozenset(_BLOCK_TAGS_SPEC.split())
UNSEEN = ("script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "canvas")
_ATOMIC = frozenset(("pre", "figure", "hr"))
_HEADINGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
_NO_ITEMS: tuple = ()  # the items of a block read whole
_NO_WORDS: tuple = ()  # the words of a run without any (a third of a page's: images, rules)
_WORD = re.compile(r"\w+")
_MAYBE_HIDDEN = lxml.etree.XPath("descendant-or-self::*[@hidden or @style]")
_HIDING_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
# `\w` in ASCII is [0-9A-Za-z_]: this byte table lower-cases those and blanks every other byte.
_ASCII_WORDS = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 or c == 95 else 32
    for c in range(256)
)
# What pages put between words beyond ASCII most (no-break and thin spaces, typographic quotes,
# dashes and ellipses, bullets, arrows, a few signs): none is a word character or has another
# lower case, so text whose only other characters are ASCII splits the same with spaces in their
# place, through the byte table (tests/unit/test_mainblocks.py checks the list).
SEPARATORS = (
    "\xa0\xa1\xa3\xa6\xa7\xa9\xab\xae\xb0\xb6\xb7\xbb\xbf\xd7\u2002\u2003\u2009\u200b"
    "\u200e\u200f\u2010\u2011\u2012\u2013\u2014\u2015\u2018\u2019\u201a\u201c\u201d\u201e"
    "\u2020\u2022\u2026\u202f\u2032\u2033\u2039\u203a\u20ac\u2122\u2190\u2191\u2192"
    "\u2193\u2197\u21a9\u25b6\u25ba\u2605\u3000\ufeff"
)
_SEPARATOR = re.compile(f"[{SEPARATORS}]")


class _Run:
    """A run of inline content (`items`), or one block read whole (`atom`). Nine runs in ten
    are blocks: they hold the element alone, without a list and a pair to put it in (fewer
    objects alive while the page is matched, so fewer collections)."""

    __slots__ = ("atom", "container", "items", "keep", "span", "words")

    def __init__(
        self,
        container,
        items: list | tuple | None = None,
        words: list[str] | None = None,
        atom=None,
    ):
        self.container = container
        # ("text", el) | ("tail", el) | ("el", el)
        self.items: list | tuple = items if items is not None else []
        self.atom = atom  # a code block, a figure or a block without blocks inside
        self.words: list[str] | tuple = words if words is not None else []
        self.keep = False
        self.span: tuple[int, int] | None = None  # where a kept run sits in the extractor's text


def words(s: str) -> list[str]:
    r"""The lower-cased `\w+` words of `s`. ASCII text (most runs, even of pages with a few
    typographic quotes) goes through a byte table, in about a third of the regex's time; so does
    text that is ASCII once its `SEPARATORS` are spaces (nine in ten of the other runs)."""
    if not s.isascii():
        spaced = _SEPARATOR.sub(" ", s)
        if not spaced.isascii():
            return _WORD.findall(s.lower())
        s = spaced
    return s.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split()


def text_of(el) -> str:
    """The text inside `el` (lxml's serialiser: about half the cost of `text_content`)."""
    return lxml.etree.tostring(el, method="text", encoding="unicode", with_tail=False)


def _runs(root) -> list[_Run]:
    """The page's inline runs and atomic blocks, in document order."""
    runs: list[_Run] = []
    # Every element with a block inside it (an inline one that holds blocks, a link around a
    # whole card, is laid out as a block too); each ancestor is visited once.
    holders = set()
    for block in root.iter(*BLOCK_TAGS):
        up = block.getparent()
        while up is not None and up not in holders:
            holders.add(up)
            up = up.getparent()
    # A figure around a table is walked like any block: read whole, its cells' words would run
    # together. Looked for from the figures (rare) down, not from every table up.
    tables = {fig for fig in root.iter("figure") if next(fig.iter("table"), None) is not None}
    _walk(root, runs, holders, tables)
    return runs


def _walk(container, runs: list[_Run], holders: set, tables: set) -> None:
    """Add the runs of `container` to `runs`. A module-level function, not a closure: a closure
    that calls itself is a reference cycle, which kept every run and the page's whole tree
    alive until the collector's next full pass, and made every collection until then slower."""
    items: list = []
    texts: list[str] = []
    text = container.text
    if text and not text.isspace():
        items.append(("text", container))
        texts.append(text)
    for child in container:
        tag = child.tag
        if tag in BLOCK_TAGS or child in holders:
            if items:
                runs.append(_Run(container, items, words(" ".join(texts)) if texts else []))
                items, texts = [], []
            # A code block, a figure, and a block with no blocks inside (most paragraphs,
            # headings, list items and cells) are one run, read in one call (an element
            # without children is its own text).
            if (tag in _ATOMIC and not (tag == "figure" and child in tables)) or (
                child not in holders
            ):
                text = text_of(child) if len(child) else child.text
                found = words(text) if text else None
                runs.append(_Run(container, _NO_ITEMS, found or _NO_WORDS, child))
            else:
                _walk(child, runs, holders, tables)
            tail = child.tail
            if tail and not tail.isspace():
                items.append(("tail", child))
                texts.append(tail)
        else:
            items.append(("el", child))
            if tag.__class__ is str:
                text = text_of(child) if len(child) else child.text
                if text:
                    texts.append(text)
            if child.tail:
                texts.append(child.tail)
    if items:
        runs.append(_Run(container, items, words(" ".join(texts)) if texts else []))


def _visible(run: _Run) -> bool:
    """Whether a run without words still shows something (an image, a rule, a figure)."""
    shown = [run.atom] if run.atom is not None else [el for kind, el in run.items if kind == "el"]
    for el in shown:
        if isinstance(el.tag, str):
            if el.tag in ("img", "hr", "figure", "picture", "video", "audio"):
                return True
            if next(el.iterdescendants("img", "picture"), None) is not None:
                return True
    return False


def _is_figure(run: _Run) -> bool:
    return run.atom is not None and run.atom.tag == "figure"


def select(runs: list[_Run], extracted: str) -> None:
    """Mark each run found in the extractor's text (`_Run.keep`).

    Long runs are found first, in document order, and pin down where they sit in the
    extractor's text. Short runs (headings, list items, table cells) then fill the stretch of
    text between two pinned runs: each must match the words right before the next pinned run
    (or, after the last one, right after the previous), so of a menu item and a heading with
    the same words, the one next to the article wins.
    """
    key = _answer_key(extracted)
    if not key:
        return
    text = _Text(key, runs)
    pins = _pin(runs, text)
    _fill(runs, key, pins, text.cover)
    if text.cover.count(0) > RESCUE_MIN:
        _rescue(runs, text)
    _headings_over_contents(runs)
    _keep_figures(runs)


def _answer_key(extracted: str) -> list[str]:
    """The words of the extractor's text. No word spans a line break: a text in ASCII (once its
    `SEPARATORS` are spaces) takes the fast way whole, any other line by line (so its lines in
    ASCII still do)."""
    if not extracted.isascii():
        spaced = _SEPARATOR.sub(" ", extracted)
        if not spaced.isascii():
            return list(chain.from_iterable(map(words, extracted.splitlines())))
        extracted = spaced
    return words(extracted)


class _Text:
    """The extractor's text as the runs are looked up in it: its words, where each occurs,
    which of its places kept runs account for, and the work still allowed."""

    __slots__ = ("budget", "cover", "grams", "key", "missed", "resume", "used", "where")

    def __init__(self, key: list[str], runs: list[_Run]) -> None:
        self.key = key
        # Where each word of the extractor's text occurs (a word, not a shingle: building a
        # tuple per word of the text would cost more than all the lookups).
        where: dict[str, list[int]] = {}
        for i, word in enumerate(key):
            spots = where.get(word)
            if spots is None:
                where[word] = [i]
            else:
                spots.append(i)
        self.where = where
        # The work allowed, in words compared: linear in the page and the text, so a page built
        # to repeat one phrase endlessly cannot make the search quadratic. Once spent, nothing
        # more is found and the rest of the page is cut.
        self.budget = WORK_PER_WORD * (len(key) + sum(len(r.words) for r in runs))
        # Each shingle of the extractor's text can vouch for one run only, so a second copy of
        # a paragraph (a teaser, a hidden duplicate) is not kept because the first one was.
        self.used = bytearray(len(key))
        self.cover = bytearray(len(key))  # words of the text some kept run accounts for
        # Per shingle, where its next free place may be; keyed by the shingle's words joined by
        # a space (words hold no space): a string is no work for the garbage collector, and a
        # tuple kept per claimed shingle (thousands on a page of trimmed runs) made it run more
        # often over everything else the process holds.
        self.resume: dict[str, int] = {}
        self.grams: set[tuple[str, ...]] | None = None  # every shingle of the text, once built
        self.missed = 0  # words compared by lookups that found nothing

    def lacks(self, shingle: list[str]) -> bool:
        """Whether the text holds the shingle (its words) nowhere. A shingle lookup that finds
        nothing tries up to `SHINGLE_TRIES` places; once lookups that found nothing (of shingles
        or of whole runs) have compared a quarter as many words as the text has (a page's
        boilerplate shares its words with the article), a set of the text's shingles is built,
        at about that cost, and turns the rest away at once."""
        grams = self.grams
        if grams is None:
            if self.missed * MISSED_SHARE < len(self.key):
                return False
            key = self.key
            grams = self.grams = set(zip(*(key[k:] for k in range(SHINGLE)), strict=False))
        return tuple(shingle) not in grams

    def occurs(self, words: list[str], lists: list, start: int, tries: int = 1 << 30) -> int:
        """The first index from `start` on where `words` occur in the text, or -1. Tried at
        the places of the rarest of its first four words (`lists`: where each of them is,
        looked up once per run), at most `tries` of them."""
        return self.free(words, lists, start, tries, taken=False)

    def free(
        self, words: list[str], lists: list, start: int, tries: int, taken: bool = True
    ) -> int:
        """The first place from `start` on where `words` occur and, with `taken`, no run's
        shingle took (`used`), or -1: a look at up to `tries` places, asked again after each
        place taken, with the same places tried and the same cost counted, in one loop. A
        page that repeats a table row asks for the next place of one shingle thousands of
        times, and a call per place taken cost more than the places it tried."""
        key, used, budget = self.key, self.used, self.budget
        spots = min(lists, key=len)
        at = lists.index(spots)
        n = len(words)
        first = words[0]
        j = bisect_left(spots, start + at)
        end = len(spots)
        while True:
            stop = min(end, j + tries)  # a fresh `tries` after each place found taken
            before = budget
            found = -1
            while j < stop:
                i = spots[j] - at
                budget -= 1
                if budget < 0:
                    break
                if key[i] == first:
                    budget -= n
                    if key[i : i + n] == words:
                        found = i
                        break
                j += 1
            if found < 0:
                self.missed += before - budget
                self.budget = budget
                return -1
            if not taken or not used[found]:
                self.budget = budget
                return found
            j += 1


def _pin(runs: list[_Run], text: _Text) -> list[tuple[int, int, int]]:
    """Keep the long runs the text holds, whole or mostly; those found after the last pinned
    one pin down where they sit: (index in runs, start, end) of each, in document order.

    A long run the page repeats further down, found further on than its own length past text
    where one of the next few long runs stands whole, is the early copy out of the text's order
    (a summary box repeating a table's row before the article): it is passed over, so the runs
    the text follows keep their places and the later copy takes the words."""
    cursor = 0  # index in the text just after the last pinned run
    pins: list[tuple[int, int, int]] = []
    key, spots_of = text.key, text.where.get
    longs = [r for r, run in enumerate(runs) if len(run.words) >= SHORT_RUN]
    last: dict[tuple[str, ...], int] | None = None  # where each long run's last copy is
    for p, r in enumerate(longs):
        run = runs[r]
        w = run.words
        n = len(w)
        if text.budget >= 1 and key[cursor : cursor + n] == w:
            # Right after the last pinned run, where most of an article's runs stand: what
            # `occurs` finds at the first place it tries, with the same cost counted.
            text.budget -= 1 + n
            i = cursor
        else:
            head = list(map(spots_of, w[:SHINGLE]))
            i = -1 if None in head else text.occurs(w, head, cursor)
        if i >= 0:
            if i - cursor > n:
                if last is None:
                    last = {tuple(runs[k].words): k for k in longs}
                if last[tuple(w)] > r and _sooner(
                    runs, longs[p + 1 : p + 1 + LOOKAHEAD], text, cursor, i
                ):
                    continue
            run.keep = True
            text.used[i : i + n] = text.cover[i : i + n] = b"\x01" * n
            run.span = (i, i + n)
            pins.append((r, i, i + n))
            cursor = i + n
            continue
        span = _mostly(run, head, text)
        if span is not None and span[0] >= cursor:
            pins.append((r, *span))
            cursor = span[1]
    return pins


def _sooner(runs: list[_Run], nexts: list[int], text: _Text, lo: int, hi: int) -> bool:
    """Whether one of the long runs `nexts` stands whole in the text between `lo` and `hi`."""
    spots_of = text.where.get
    for r in nexts:
        w = runs[r].words
        head = list(map(spots_of, w[:SHINGLE]))
        if None in head:
            continue
        i = text.occurs(w, head, lo)
        if i >= 0 and i + len(w) <= hi:
            return True
    return False


def _mostly(run: _Run, head: list, text: _Text) -> tuple[int, int] | None:
    """Keep a long run most of whose shingles the text holds at free places (a sentence the
    extractor trimmed); returns where it sits, or None when it is not kept."""
    w = run.words
    # Where each word is, looked up once; a shingle with a word the text lacks cannot occur,
    # and a run with too few shingles left is turned away before any is looked up.
    lists = head + list(map(text.where.get, w[SHINGLE:]))
    grams = len(w) - SHINGLE + 1
    need = PARTIAL_SHARE * grams
    if grams - lists[:grams].count(None) < need:  # shingle k holds word k
        return None
    alive = _possible_shingles(lists, grams)
    if alive.count(1) < need or _boilerplate(w, lists, alive, text):
        return None
    free = _free_shingles(w, lists, alive, need, text)
    if len(free) < need:
        return None
    group = _together(free, len(w))
    run.keep = True
    for gram, i in group if len(group) >= need else free:
        text.used[i] = 1
        text.cover[i : i + SHINGLE] = b"\x01" * SHINGLE
        text.resume[gram] = i + 1
    if len(group) < need:
        return None  # kept, but it pins nothing down: its words are spread over the text
    places = [i for _, i in group]
    run.span = (min(places), max(places) + SHINGLE)
    return run.span


def _possible_shingles(lists: list, grams: int) -> bytearray:
    """Per shingle of a run, 1 unless one of its words is missing from the text."""
    alive = bytearray(b"\x01") * grams
    m = -1
    with contextlib.suppress(ValueError):
        while True:
            m = lists.index(None, m + 1)
            lo = max(0, m - SHINGLE + 1)
            alive[lo : m + 1] = bytes(min(m + 1, grams) - lo)
    return alive


def _boilerplate(w: list[str], lists: list, alive: bytearray, text: _Text) -> bool:
    """A long run of boilerplate shares next to nothing with the text: eight shingles spread
    over it tell, before every one of them is looked up."""
    grams = len(alive)
    if grams <= 4 * SAMPLE:
        return False
    step = grams // SAMPLE
    seen = sum(
        alive[k]
        and not text.lacks(w[k : k + SHINGLE])
        and text.occurs(w[k : k + SHINGLE], lists[k : k + SHINGLE], 0) >= 0
        for k in range(0, grams, step)
    )
    return seen < PARTIAL_SHARE * SAMPLE / 2


def _together(free: list[tuple[str, int]], n: int) -> list[tuple[str, int]]:
    """The largest group of a trimmed run's shingle places that lie within twice the run's
    length of each other. A trimmed sentence stands in one place in the text; a shingle found
    far from the rest is another sentence's (a title's words repeated at the end of the page),
    and claiming it would take those words from the run they belong to and stretch the run's
    span over everything between."""
    places = [i for _, i in free]
    if max(places) - min(places) <= 2 * n:
        return free
    order = sorted(range(len(free)), key=places.__getitem__)
    best_lo, best_hi, lo = 0, 0, 0
    for hi in range(len(order)):
        while places[order[hi]] - places[order[lo]] > 2 * n:
            lo += 1
        if hi + 1 - lo > best_hi - best_lo:
            best_lo, best_hi = lo, hi + 1
    return [free[k] for k in sorted(order[best_lo:best_hi])]


def _free_shingles(
    w: list[str], lists: list, alive: bytearray, need: float, text: _Text
) -> list[tuple[str, int]]:
    """The run's shingles found at places no other run's shingle took: (shingle, place) each;
    stops early once too many are missing to reach `need`."""
    key, used, resume = text.key, text.used, text.resume
    left = alive.count(1)
    free: list[tuple[str, int]] = []
    for k in range(len(alive)):
        if not alive[k]:
            continue
        left -= 1
        shingle, found = w[k : k + SHINGLE], lists[k : k + SHINGLE]
        if text.lacks(shingle):
            if len(free) + left < need:
                break  # too many shingles missing already
            continue
        gram = " ".join(shingle)
        start = resume.get(gram, 0)
        # Most shingles of a run the text holds are at the first place tried: checked here
        # with the same cost counted as `occurs` would, which is asked only otherwise.
        spots = min(found, key=len)
        at = found.index(spots)
        j = bisect_left(spots, start + at)
        i = spots[j] - at if j < len(spots) else -1
        if i >= 0 and text.budget >= 1 and key[i : i + SHINGLE] == shingle:
            text.budget -= 1 + SHINGLE
            if used[i]:
                i = text.free(shingle, found, i + 1, SHINGLE_TRIES)
        else:
            i = text.free(shingle, found, start, SHINGLE_TRIES)
        if i >= 0:
            free.append((gram, i))
        elif len(free) + left < need:
            break  # too many shingles missing already
    return free


def _fill(
    runs: list[_Run], key: list[str], pins: list[tuple[int, int, int]], cover: bytearray
) -> None:
    """Keep the short runs between pinned runs whose words fill the text between them."""
    prev_run, prev_end = -1, 0
    for r, start, end in [*pins, (len(runs), len(key), len(key))]:
        gap_end = start
        for run in reversed(runs[prev_run + 1 : r]):  # backwards from the next pinned run
            w = run.words
            n = len(w)
            if not n or n >= SHORT_RUN or gap_end - prev_end < n:
                continue
            first = w[0]
            for at in range(gap_end - n, max(prev_end, gap_end - n - NEAR) - 1, -1):
                if key[at] == first and key[at : at + n] == w:
                    run.keep = True
                    cover[at : at + n] = b"\x01" * n
                    run.span = (at, at + n)
                    gap_end = at
                    break
        if r == len(runs):  # after the last pinned run: forwards
            cursor = prev_end
            for run in runs[prev_run + 1 : r]:
                w = run.words
                n = len(w)
                if run.keep or not n or n >= SHORT_RUN:
                    continue
                first = w[0]
                for at in range(cursor, min(cursor + NEAR, len(key) - n) + 1):
                    if key[at] == first and key[at : at + n] == w:
                        run.keep = True
                        cover[at : at + n] = b"\x01" * n
                        run.span = (at, at + n)
                        cursor = at + n
                        break
        prev_run, prev_end = r, end


def _rescue(runs: list[_Run], text: _Text) -> None:
    """Keep the runs the ordered passes could not place whose words the extractor's text holds
    at places no kept run accounts for.

    The ordered passes miss runs out of the order they expect (short runs before the first or
    after the last long one, a table's cells, a heading whose neighbours were trimmed, a run the
    extractor moved); the extractor kept those words, so cutting them loses content `text`
    has. A long run may sit anywhere in the unaccounted text. A short one (a cell, a list item,
    a heading) only next to accounted words and between the places of the kept runs before and
    after it on the page, so chains of cells grow from a kept neighbour (in document order,
    then backwards) and a table of contents cannot take its headings' words.
    """
    key, cover = text.key, text.cover
    # The words no kept run accounts for: a run whose first words are not all among them cannot
    # stand whole in that text, and is passed over before any place is looked up.
    loose: set[str] = set()
    i = cover.find(0)
    while i >= 0:
        loose.add(key[i])
        i = cover.find(0, i + 1)
    for forward in (True, False):
        _rescue_whole(runs, text, loose, forward)
    _rescue_trimmed(runs, text, loose)


def _rescue_whole(runs: list[_Run], text: _Text, loose: set[str], forward: bool) -> None:
    """One pass of the rescue of runs the unaccounted text holds whole, in document order
    (`forward`) or backwards: each run placed moves the edge the next short run must follow."""
    size = len(text.key)
    # Per run, where the nearest kept run after it (forward) or before it starts/ends.
    bound = [0] * len(runs)
    edge = size if forward else 0
    for r in range(len(runs) - 1, -1, -1) if forward else range(len(runs)):
        bound[r] = edge
        span = runs[r].span
        if span is not None:
            edge = span[0] if forward else span[1]
    edge = 0 if forward else size
    for r in range(len(runs)) if forward else range(len(runs) - 1, -1, -1):
        run = runs[r]
        if run.span is not None:
            edge = run.span[1] if forward else run.span[0]
            continue
        w = run.words
        if run.keep or not w or text.budget < 0 or not loose.issuperset(w[:SHINGLE]):
            continue
        lo, hi = (edge, bound[r]) if forward else (bound[r], edge)
        i = _whole_between(w, text, lo, hi)
        if i >= 0:
            n = len(w)
            run.keep = True
            run.span = (i, i + n)
            text.cover[i : i + n] = b"\x01" * n
            edge = i + n if forward else i


def _whole_between(w: list[str], text: _Text, lo: int, hi: int) -> int:
    """Where the run's words stand whole in the unaccounted text, or -1; a short run only
    between `lo` and `hi` and next to accounted words."""
    key, cover, size = text.key, text.cover, len(text.key)
    lists = [text.where.get(word) for word in w[:SHINGLE]]
    if None in lists:
        return -1
    n = len(w)
    spots = min(lists, key=len)
    at = lists.index(spots)
    for spot in spots:
        i = spot - at
        text.budget -= 1
        if i < 0 or i + n > size or cover.find(1, i, i + n) >= 0:
            continue
        if n < SHORT_RUN and (
            i < lo
            or i + n > hi
            or (
                cover.find(1, max(0, i - NEAR - 1), i) < 0
                and cover.find(1, i + n, min(size, i + n + NEAR + 1)) < 0
            )
        ):
            continue
        text.budget -= n
        if key[i : i + n] == w:
            return i
    return -1


def _rescue_trimmed(runs: list[_Run], text: _Text, loose: set[str]) -> None:
    """A long run the extractor trimmed in the middle (a date cut out of a byline) still holds
    shingles of the unaccounted text: kept when enough of them are there."""
    key, cover, where = text.key, text.cover, text.where
    for run in runs:
        w = run.words
        n = len(w)
        if run.keep or n < SHORT_RUN or text.budget < 0:
            continue
        grams = n - SHINGLE + 1
        if sum(word in loose for word in w) < SHINGLE + 1:  # not two shingles' worth
            continue
        found: list[int] = []
        for k in range(grams):
            lists = [where.get(word) for word in w[k : k + SHINGLE]]
            if None in lists:
                continue
            spots = min(lists, key=len)
            at = lists.index(spots)
            for spot in spots[:SHINGLE_TRIES]:
                i = spot - at
                text.budget -= 1 + SHINGLE
                if (
                    i >= 0
                    and cover.find(1, i, i + SHINGLE) < 0
                    and key[i : i + SHINGLE] == w[k : k + SHINGLE]
                ):
                    found.append(i)
                    break
        if len(found) >= max(2, TRIMMED_SHARE * grams):
            run.keep = True
            for i in found:
                cover[i : i + SHINGLE] = b"\x01" * SHINGLE


def _headings_over_contents(runs: list[_Run]) -> None:
    """A table of contents links to its headings with their own words: when a kept entry (a
    link to an anchor on the page) has the words of a heading that is not kept, after the
    section number the entry may put before them, the heading is the one the extractor's
    text meant."""
    headings: dict[tuple[str, ...], _Run] = {}
    kept: list[_Run] = []
    for run in runs:
        if run.keep:
            kept.append(run)
            continue
        if run.atom is not None and run.atom.tag in _HEADINGS and run.words:
            headings.setdefault(tuple(run.words), run)
    if not headings:
        return
    sizes = {len(words) for words in headings}
    for run in kept:
        w = run.words
        k = 0
        while k < len(w) - 1 and w[k].isdigit():  # the entry's number ("2.5 Cafes")
            k += 1
        if len(w) - k not in sizes and len(w) not in sizes:
            continue  # no heading has as many words (most kept runs are paragraphs)
        heading = (headings.get(tuple(w)) or headings.get(tuple(w[k:]))) if w else None
        if heading is None or heading.keep:
            continue
        if run.atom is not None:
            links = list(run.atom.iter("a"))
        else:
            kind, el = run.items[0]
            links = [el] if kind == "el" and el.tag == "a" else []
        if links and all((a.get("href") or "").startswith("#") for a in links):
            run.keep, heading.keep = False, True
            heading.span, run.span = run.span, None


def _keep_figures(runs: list[_Run]) -> None:
    """Runs without words (images, rules) and figures the extractor left out stay between two
    kept runs (the extractor drops captions with their images)."""
    prev_kept = False
    pending: list[_Run] = []
    for run in runs:
        if not run.words or (not run.keep and _is_figure(run)):
            pending.append(run)
            continue
        if run.keep and prev_kept:
            for p in pending:
                p.keep = _visible(p)
        pending = []
        prev_kept = run.keep


def prune(root, runs: list[_Run]) -> None:
    """Cut every run not kept, then every block left without kept content."""
    whole = set()  # kept as they are, descendants included
    live = {root}  # holds something kept
    for run in runs:
        if run.keep:
            if run.atom is not None:
                whole.add(run.atom)
            for kind, item in run.items:
                if kind == "el":
                    whole.add(item)
            el = run.container
            while el is not None and el not in live:
                live.add(el)
                el = el.getparent()
    for run in runs:
        # A run in a block that holds nothing kept goes with that block, below.
        if run.keep or run.container not in live:
            continue
        if run.atom is not None:
            run.atom.drop_tree()
        for kind, item in run.items:
            if kind == "text":
                item.text = None
            elif kind == "tail":
                item.tail = None
            else:
                item.getparent().remove(item)
    stack = [root]
    while stack:
        for child in list(stack.pop()):
            if not isinstance(child.tag, str) or child in whole:
                continue
            if child in live:
                stack.append(child)
            else:
                child.drop_tree()


def main_tree(tree: lxml.html.HtmlElement, extracted: str) -> lxml.html.HtmlElement:
    """Cut `tree` (in place) down to the runs found in `extracted`; returns its body."""
    body = tree.find("body")
    root = body if body is not None else tree
    # One pass in C; each tail stays, joined to the text before it (as `drop_tree` does).
    lxml.etree.strip_elements(root, *UNSEEN, with_tail=False)
    # A line break separates words (the extractor writes it as one); read whole, a block's text
    # would join the words on either side of it.
    for br in root.iter("br"):
        tail = br.tail
        if not tail or not tail[0].isspace():
            br.tail = "\n" + tail if tail else "\n"
    runs = _runs(root)
    select(runs, extracted)
    prune(root, runs)
    _unhide(root)
    return root


def _unhide(root) -> None:
    """Show what is left: the extractor kept it, but the Markdown renderer skips an element
    marked `hidden` or styled out of sight (pages that stream their article into a hidden
    block and move it with a script)."""
    for el in _MAYBE_HIDDEN(root):
        attrib = el.attrib
        if "hidden" in attrib:
            del attrib["hidden"]
        style = attrib.get("style")
        if style and _HIDING_STYLE.search(style):
            attrib["style"] = _HIDING_STYLE.sub("", style)
