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
from bisect import bisect_right

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
_ATOMIC = frozenset(("pre", "figure", "hr"))
_WORD = re.compile(r"\w+")


class _Run:
    __slots__ = ("container", "items", "keep", "words")

    def __init__(self, container):
        self.container = container
        self.items: list[tuple[str, object]] = []  # ("text", el) | ("tail", el) | ("el", el)
        self.words: list[str] = []
        self.keep = False


def _is_block(el) -> bool:
    tag = el.tag
    if not isinstance(tag, str):
        return False
    if tag in BLOCK_TAGS:
        return True
    # An inline element that holds blocks (a link around a whole card) is laid out as a block.
    return next(el.iterdescendants(*BLOCK_TAGS), None) is not None if len(el) else False


def _runs(root) -> list[_Run]:
    """The page's inline runs and atomic blocks, in document order."""
    runs: list[_Run] = []

    def words(s: str | None) -> list[str]:
        return _WORD.findall(s.lower()) if s else []

    def walk(container) -> None:
        run = _Run(container)
        if container.text:
            run.items.append(("text", container))
            run.words.extend(words(container.text))
        for child in container:
            tag = child.tag
            if isinstance(tag, str) and tag in _ATOMIC:
                runs.append(run)
                atom = _Run(container)
                atom.items.append(("atom", child))
                atom.words = words(child.text_content())
                runs.append(atom)
                run = _Run(container)
                if child.tail:
                    run.items.append(("tail", child))
                    run.words.extend(words(child.tail))
            elif _is_block(child):
                runs.append(run)
                walk(child)
                run = _Run(container)
                if child.tail:
                    run.items.append(("tail", child))
                    run.words.extend(words(child.tail))
            else:
                run.items.append(("el", child))
                if isinstance(tag, str):
                    run.words.extend(words(child.text_content()))
                elif child.tail:  # a comment or processing instruction: its tail is text
                    run.words.extend(words(child.tail))
                    continue
                run.words.extend(words(child.tail))
        runs.append(run)

    walk(root)
    return [r for r in runs if r.items]


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
    key_words = _WORD.findall(extracted.lower())
    if not key_words:
        return
    joined = " " + " ".join(key_words) + " "
    starts = []  # character offset in `joined` of each word
    pos = 1
    for w in key_words:
        starts.append(pos)
        pos += len(w) + 1
    shingles = {tuple(key_words[i : i + SHINGLE]) for i in range(len(key_words) - SHINGLE + 1)} or {
        tuple(key_words)
    }
    cursor = 0  # index in key_words just after the last found run
    for run in runs:
        w = run.words
        if not w:
            continue
        start = starts[cursor] - 1 if cursor < len(starts) else len(joined)
        at = joined.find(" " + " ".join(w) + " ", start)
        if at >= 0:
            idx = bisect_right(starts, at + 1) - 1
            if len(w) >= SHORT_RUN or idx - cursor <= NEAR:
                run.keep = True
                cursor = idx + len(w)
                continue
        if len(w) >= SHORT_RUN:
            grams = [tuple(w[i : i + SHINGLE]) for i in range(len(w) - SHINGLE + 1)]
            found = sum(1 for g in grams if g in shingles)
            if found >= PARTIAL_SHARE * len(grams):
                run.keep = True
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
    runs = _runs(root)
    select(runs, extracted)
    prune(root, runs)
    return root
