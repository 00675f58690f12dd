"""trafilatura's readings compared on the development set, by data set, half and page type.

Sift reads every page leaning to recall (docs/EXTRACTION.md §Published benchmark figures). The
balanced reading does better on modern pages that are not articles and worse on the older
article sets, and costs more where its retry fires; this bench measures both sides, for a
rule that picks the reading by what the page declares it is (docs/EXTRACTION.md §Page types:
measured, not adopted). Each reading is one trafilatura call on the tree Sift parses, with
Sift's options (the jusText second reading adds a jusText pass on the pages it retries), then
Sift's `text` steps (`tidy`, the short-page fallback, the bot-wall check); the code-block
whitespace repair is left out, as it changes no word.

    .venv/bin/python bench/extract_readings.py [--data ../shared/extraction] [--rounds 1]
                                               [--limit N]

Prints, per reading: F1 per data set over all pages and over each half (pages at even and odd
positions within their data set: tune on one, check on the other), macro F1, F1 per WCXB page
type, the pages whose text differs from the recall reading, and ms/page of the reading (each
page's best over the rounds, the readings alternating page by page).
"""

from __future__ import annotations

import argparse
import copy
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trafilatura  # noqa: E402

from bench.extract import _scorer  # noqa: E402
from sift.fetch import pagemeta, render  # noqa: E402

_TYPE_VALUE = re.compile(r'"@type"\s*:\s*("[^"]{1,100}"|\[[^\]]{1,1000}\])')
_NAME = re.compile(r'"([^"]{1,100})"')
# A website page or a forum thread, unless it also declares what the recall reading serves well.
_NOT_ARTICLE = frozenset({"WebPage", "WebSite", "DiscussionForumPosting"})
_KEEP_RECALL = re.compile(
    r"Article$|^BlogPosting$|^Report$|^(Question|Answer|FAQPage|QAPage)$|^Product$"
)


def declared_types(found: dict[str, list]) -> set[str]:
    """schema.org `@type` names in the page's JSON-LD."""
    names: set[str] = set()
    for el in found["script"]:
        if "ld+json" in (el.get("type") or ""):
            for m in _TYPE_VALUE.finditer(el.text or ""):
                names.update(_NAME.findall(m.group(1)))
    return names


def declared_site_page(found: dict[str, list]) -> bool:
    """The page declares itself a website page or a forum thread, and no article, Q&A or
    product."""
    types = declared_types(found)
    website = any(
        (m.get("property") or "").lower() == "og:type"
        and (m.get("content") or "").strip().lower() == "website"
        for m in found["meta"]
    )
    if not website and not types & _NOT_ARTICLE:
        return False
    return not any(_KEEP_RECALL.search(t) for t in types)


def _options(recall: bool, comments: bool = False) -> dict:
    return {
        "output_format": "txt",
        "include_comments": comments,
        "include_tables": True,
        "include_links": False,
        "include_images": False,
        "favor_recall": recall,
        "deduplicate": False,
        "with_metadata": False,
    }


RECALL = _options(True)
BALANCED = _options(False)
JUSTEXT_BELOW = 3000  # characters of recall text under which jusText is tried as well
JUSTEXT_RATIO = 3.0  # its text is kept when this many times longer


def _extract(tree, url: str, options: dict) -> str:
    return render.tidy(trafilatura.extract(tree, url=url or None, **options) or "")


def _justext_second(tree, found: dict, url: str) -> str:
    """The recall reading; on a declared site page whose text is short, jusText as well (the
    candidate trafilatura's balanced retry adds), kept when much longer. `justext_rescue` is
    trafilatura's internal function: a bench may lean on it, the product would pin it."""
    text = _extract(tree, url, RECALL)
    if len(text) >= JUSTEXT_BELOW or not declared_site_page(found):
        return text
    from trafilatura.external import justext_rescue
    from trafilatura.settings import Extractor

    options = Extractor(output_format="txt", tables=True, recall=True)
    body, found_text = justext_rescue(copy.deepcopy(tree), options)
    if len(found_text) <= JUSTEXT_RATIO * len(text):
        return text
    return render.tidy("\n".join(t.strip() for t in body.itertext() if t.strip()))


# Each reading: the page's text from its tree (head code dropped), its collected elements, URL.
READINGS: dict[str, Callable[[object, dict, str], str]] = {
    "recall (Sift)": lambda tree, found, url: _extract(tree, url, RECALL),
    "balanced": lambda tree, found, url: _extract(tree, url, BALANCED),
    "by page type": lambda tree, found, url: _extract(
        tree, url, BALANCED if declared_site_page(found) else RECALL
    ),
    "forum replies": lambda tree, found, url: _extract(
        tree,
        url,
        _options(True, comments=True)
        if "DiscussionForumPosting" in declared_types(found)
        else RECALL,
    ),
    "jusText second": _justext_second,
}


def _text(name: str, tree, found: dict, url: str, scripted: bool) -> tuple[str, float]:
    """Sift's `text` of the page under reading `name` (empty for a script-only page, as
    `bench.extract.sift_page` scores a bot wall), and the reading's ms."""
    t0 = time.perf_counter()
    out = READINGS[name](tree, found, url)
    ms = (time.perf_counter() - t0) * 1000
    if len(out) < render.SHORT_EXTRACT:
        if render._script_only(tree, scripted):
            return "", ms
        out = render._fallback_text(tree) or out
    return out, ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "extraction"))
    ap.add_argument("--limit", type=int, default=0, help="pages per data set (0: all)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds; each page's best time is kept")
    a = ap.parse_args()
    score = _scorer(Path(a.data))
    rows = score.load(None, a.limit)
    position: dict[str, int] = {}
    half = []
    for r in rows:
        half.append(position.get(r["dataset"], 0) % 2)
        position[r["dataset"]] = position.get(r["dataset"], 0) + 1
    outs = {name: [""] * len(rows) for name in READINGS}
    best = {name: [float("inf")] * len(rows) for name in READINGS}
    for rnd in range(a.rounds):
        for i, r in enumerate(rows):
            names = list(READINGS) if (rnd + i) % 2 == 0 else list(READINGS)[::-1]
            for name in names:
                tree = render._parse_html(r["html"])
                if tree is None:
                    continue
                found = pagemeta.page_elements(tree)
                scripted = render._drop_code(tree)
                outs[name][i], ms = _text(name, tree, found, r["url"] or "", scripted)
                best[name][i] = min(best[name][i], ms)
    sets = list(dict.fromkeys(r["dataset"] for r in rows))
    for name in READINGS:
        scores = [score.page_score(o, r["truth"]) for o, r in zip(outs[name], rows, strict=True)]

        def f1(pick, scores=scores) -> float:
            return score.aggregate(
                [s for s, r, h in zip(scores, rows, half, strict=True) if pick(r, h)]
            )["f1"]

        print(f"{name}")
        for label, h in (("all", None), ("h0", 0), ("h1", 1)):
            per = [
                f1(lambda r, hh, ds=ds, h=h: r["dataset"] == ds and h in (None, hh)) for ds in sets
            ]
            cells = "  ".join(f"{ds} {v:.4f}" for ds, v in zip(sets, per, strict=True))
            print(f"  {label:<4} {cells}  macro {statistics.fmean(per):.4f}")
        types = sorted(
            {(r.get("meta") or {}).get("page_type") or "-" for r in rows if r.get("meta")}
        )
        by_type = [
            f"{t} {f1(lambda r, h, t=t: (r.get('meta') or {}).get('page_type') == t):.3f}"
            for t in types
        ]
        print(f"  WCXB by page type: {', '.join(by_type)}")
        differ = sum(o != b for o, b in zip(outs[name], outs["recall (Sift)"], strict=True))
        print(
            f"  pages whose text differs from the recall reading: {differ}; ms/page "
            f"{statistics.fmean(m for m in best[name] if m != float('inf')):.2f}"
        )


if __name__ == "__main__":
    main()
