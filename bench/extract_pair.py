"""`clean` and metadata time of two versions of Sift and of trafilatura alone, interleaved page by
page in one process, so all three see the same machine load.

On the shared machine the load moves the ratio to trafilatura more between two runs of one code
than a change moves it; two processes started together still drift apart. Here another
checkout's `sift` package (an export of the commit compared against) is copied to a temporary
folder under the name `sift_start`, its imports rewritten, and imported beside this one.

    git archive <commit> | tar -x -C /tmp/start
    .venv/bin/python bench/extract_pair.py --start /tmp/start [--data ../shared/extraction]
                                           [--rounds 2] [--limit N] [--synthetic N]

`--synthetic N`: the drain bench's first N articles, fetched from the bench site over loopback,
instead of the data set, against the drain's bare loop's extraction (`extract_main(html, url,
"txt")`) rather than trafilatura's Markdown.

Prints, per data set and over all pages, each page's best time over the rounds (mean, ms):
trafilatura alone (`bench/extract.py`'s baseline), the start's `clean` and this `clean` with
their ratios to it; then the title
and metadata of both on the same parsed trees, checked equal page by page.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import synthetic_pages  # noqa: E402
from bench.extract import _metadata, _scorer, baseline_page  # noqa: E402
from sift.fetch import render  # noqa: E402

_IMPORT = re.compile(r"\b(from|import) sift\b")


def _start_package(start: Path, into: Path):
    """The start checkout's `sift` as `sift_start`: its render and pagemeta modules."""
    shutil.copytree(start / "sift", into / "sift_start")
    for path in (into / "sift_start").rglob("*.py"):
        path.write_text(_IMPORT.sub(r"\1 sift_start", path.read_text()))
    sys.path.insert(0, str(into))
    return (
        importlib.import_module("sift_start.fetch.render"),
        importlib.import_module("sift_start.fetch.pagemeta"),
    )


def _best(rows, fns: dict, rounds: int) -> dict[str, list[float]]:
    """Each page's best ms per function; the order rotates page by page and round by round."""
    names = list(fns)
    best = {n: [float("inf")] * len(rows) for n in names}
    for rnd in range(rounds):
        for i, r in enumerate(rows):
            k = (i + rnd) % len(names)
            for n in names[k:] + names[:k]:
                t0 = time.perf_counter()
                fns[n](r)
                best[n][i] = min(best[n][i], (time.perf_counter() - t0) * 1000)
    return best


def _by_set(rows) -> dict[str, list[int]]:
    per: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        per.setdefault(r["dataset"], []).append(i)
    per["all"] = list(range(len(rows)))
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", required=True, help="an exported checkout of the other commit")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "extraction"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="pages per data set (0: all)")
    ap.add_argument("--synthetic", type=int, default=0, help="N bench articles instead")
    a = ap.parse_args()
    if a.synthetic:
        pages = synthetic_pages(a.synthetic)
        rows = [{**p, "dataset": "synthetic", "key": str(i)} for i, p in enumerate(pages)]
    else:
        rows = _scorer(Path(a.data)).load(None, a.limit)
    with tempfile.TemporaryDirectory() as tmp:
        old_render, old_meta = _start_package(Path(a.start), Path(tmp))
        fns = {
            "trafilatura": (
                (lambda r: render.extract_main(r["html"], r["url"], "txt"))
                if a.synthetic
                else (lambda r: baseline_page(r["html"], r["url"], "clean"))
            ),
            "start": lambda r: old_render.render("html", r["html"], "clean", r["url"] or ""),
            "this": lambda r: render.render("html", r["html"], "clean", r["url"] or ""),
        }
        best = _best(rows, fns, a.rounds)
        print("clean, ms/page (÷ trafilatura alone)")
        for ds, idx in _by_set(rows).items():
            m = {n: statistics.fmean(best[n][j] for j in idx) for n in fns}
            t = m["trafilatura"]
            print(
                f"  {ds:<10} trafilatura {t:6.2f}  start {m['start']:6.2f} ({m['start'] / t:.3f})"
                f"  this {m['this']:6.2f} ({m['this'] / t:.3f})"
            )
        trees = [render._parse_html(r["html"]) for r in rows]

        def start_meta(i: int) -> dict:
            tree = trees[i]
            title = old_render.html_title(tree)
            return old_meta.page_metadata(tree, rows[i]["url"] or "", title)

        def this_meta(i: int) -> dict:
            return _metadata(trees[i], rows[i]["url"] or "")

        keep = [i for i, t in enumerate(trees) if t is not None]
        for i in keep:
            if start_meta(i) != this_meta(i):
                print(f"  metadata differs: {rows[i]['dataset']} {rows[i]['key']}")
        idx_rows = [{"i": i} for i in keep]
        meta_best = _best(
            idx_rows,
            {"start": lambda r: start_meta(r["i"]), "this": lambda r: this_meta(r["i"])},
            a.rounds,
        )
        print("title and metadata on the parsed tree, ms/page")
        sets = _by_set([rows[i] for i in keep])
        for ds, idx in sets.items():
            m = {n: statistics.fmean(meta_best[n][j] for j in idx) for n in meta_best}
            print(f"  {ds:<10} start {m['start']:6.2f}  this {m['this']:6.2f}")


if __name__ == "__main__":
    main()
