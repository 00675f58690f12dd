"""Find, in the page's own tree, the content the main-content extractor chose, and cut the rest.

trafilatura decides *what* the main content is (it measured best on the data sets in
docs/EXTRACTION.md §Measured on the development set), but its output has lost link targets,
image sources, code languages and definition-list structure. So its text is used as an answer
key: the page is split into runs of inline content (what a browser would lay out as one block
of text), each run is looked up in the extractor's text, and runs not found are cut from the
tree. What remains is the original markup of the main content, for the Markdown renderer.

A run is found when its words appear in the extractor's text in document order (short runs must
follow the previous found run closely, so a lone "Home" in a menu cannot match the article);
a long run also counts when most of its 4-word shingles appear anywhere, which tolerates a
sentence the extractor trimmed. Runs without words (images, rules) stay when the runs on both
sides of them stay. Code blocks (`pre`) are one run each, never split.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict

import lxml.html

SHINGLE = 4
SHORT_RUN = 6  # runs with fewer words must sit right after the previous found run
NEAR = 12  # how many extractor words may lie between the previous found run and a short one
PARTIAL_SHARE = 0.5  # share of a long run's shingles the extractor's text must hold

_BLOCK_TAGS_SPEC = (
    "address article aside blockquote body caption center dd details dialog dir div dl dt "
    "fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend "
    "li main menu nav ol p pre section summary table tbody td tfoot th thead tr ul"
)
BLOCK_TAGS = frozenset(_BLOCK_TAGS_SPEC.split())
UNSEEN = ".//script|.//style|.//noscript|.//template|.//svg|.//iframe|.//object|.//embed|.//canvas"
_ATOMIC = frozenset(("pre", "figure", "hr"))
_WORD = re.compile(r"\w+")


class _Run:
    __slots__ = ("container", "items", "keep", "words")

    def __init__(self, container):
        self.container = container
        self.items: list[tuple[str, object]] = []  # ("text", el) | ("tail", el) | ("el", el)
        self.words: list[str] = []
        self.keep = False


def _holds_blocks(el) -> bool:
    """An inline element that holds blocks (a link around a whole card) is laid out as one."""
    return next(el.iterdescendants(*BLOCK_TAGS), None) is not None


def _runs(root) -> list[_Run]:
    """The page's inline runs and atomic blocks, in document order."""
    runs: list[_Run] = []

    def close(container, items: list, texts: list[str]) -> None:
        if items:
            run = _Run(container)
            run.items = items
            run.words = _WORD.findall(" ".join(texts).lower()) if texts else []
            runs.append(run)

    def walk(container) -> None:
        items: list = []
        texts: list[str] = []
        text = container.text
        if text and not text.isspace():
            items.append(("text", container))
            texts.append(text)
        for child in container:
            tag = child.tag
            if not isinstance(tag, str):  # a comment: its tail is text of the run
                items.append(("el", child))
                if child.tail:
                    texts.append(child.tail)
                continue
            atomic = tag in _ATOMIC
            if atomic or tag in BLOCK_TAGS or (len(child) and _holds_blocks(child)):
                close(container, items, texts)
                if atomic:
                    close(container, [("atom", child)], [child.text_content()])
                else:
                    walk(child)
                items, texts = [], []
                tail = child.tail
                if tail and not tail.isspace():
                    items.append(("tail", child))
                    texts.append(tail)
            else:
                items.append(("el", child))
                texts.append(child.text_content())
                if child.tail:
                    texts.append(child.tail)
        close(container, items, texts)

    walk(root)
    return runs


def _visible(run: _Run) -> bool:
    """Whether a run without words still shows something (an image, a rule, a figure)."""
    for kind, el in run.items:
        if kind in ("atom", "el") and isinstance(el.tag, str):
            if el.tag in ("img", "hr", "figure", "picture", "video", "audio"):
                return True
            if next(el.iterdescendants("img", "picture"), None) is not None:
                return True
    return False


def _is_figure(run: _Run) -> bool:
    kind, el = run.items[0]
    return kind == "atom" and el.tag == "figure"


def select(runs: list[_Run], extracted: str) -> None:
    """Mark each run found in the extractor's text (`_Run.keep`)."""
    key = _WORD.findall(extracted.lower())
    if not key:
        return
    # Where each word, and each shingle, of the extractor's text starts.
    where: defaultdict = defaultdict(list)
    for i, word in enumerate(key):
        where[word].append(i)
    for i in range(len(key) - SHINGLE + 1):
        where[tuple(key[i : i + SHINGLE])].append(i)
    # Each shingle of the extractor's text can vouch for one run only, so a second copy of a
    # paragraph (a teaser, a hidden duplicate) is not kept because the first one was.
    used = bytearray(len(key))
    cursor = 0  # index in `key` just after the last found run
    for run in runs:
        w = run.words
        if not w:
            continue
        n = len(w)
        limit = len(key) if n >= SHORT_RUN else cursor + NEAR + 1
        spots = where.get(tuple(w[:SHINGLE]) if n >= SHINGLE else w[0], ())
        for j in range(bisect_left(spots, cursor), len(spots)):
            i = spots[j]
            if i > limit:
                break
            if key[i : i + n] == w:
                run.keep = True
                cursor = i + n
                used[i : i + n] = b"\x01" * n
                break
        if run.keep or n < SHORT_RUN:
            continue
        free = []
        for k in range(n - SHINGLE + 1):
            for i in where.get(tuple(w[k : k + SHINGLE]), ()):
                if not used[i]:
                    free.append(i)
                    break
        if len(free) >= PARTIAL_SHARE * (n - SHINGLE + 1):
            run.keep = True
            for i in free:
                used[i] = 1
    # Runs without words (images, rules) and figures the extractor left out stay between two
    # kept runs (the extractor drops captions with their images).
    prev_kept = False
    pending: list[_Run] = []
    for run in runs:
        if not run.words or (not run.keep and _is_figure(run)):
            if _visible(run):
                pending.append(run)
            continue
        if run.keep and prev_kept:
            for p in pending:
                p.keep = True
        pending = []
        prev_kept = run.keep


def prune(root, runs: list[_Run]) -> None:
    """Cut every run not kept, then every block left without kept content."""
    live = set()
    for run in runs:
        if run.keep:
            el = run.container
            if run.items[0][0] == "atom":
                live.add(run.items[0][1])
                for d in run.items[0][1].iterdescendants():
                    live.add(d)
            while el is not None and el not in live:
                live.add(el)
                el = el.getparent()
            for kind, item in run.items:
                if kind == "el":
                    live.add(item)
                    live.update(item.iterdescendants())
            continue
        for kind, item in run.items:
            if kind == "text":
                item.text = None
            elif kind == "tail":
                item.tail = None
            elif kind == "el":
                item.getparent().remove(item)
            else:
                item.drop_tree()
    stack = [root]
    while stack:
        for child in list(stack.pop()):
            if not isinstance(child.tag, str):
                continue
            if child in live:
                stack.append(child)
            else:
                child.drop_tree()


def main_tree(tree: lxml.html.HtmlElement, extracted: str) -> lxml.html.HtmlElement:
    """Cut `tree` (in place) down to the runs found in `extracted`; returns its body."""
    body = tree.find("body")
    root = body if body is not None else tree
    for el in root.xpath(UNSEEN):
        el.drop_tree()
    runs = _runs(root)
    select(runs, extracted)
    prune(root, runs)
    return root
