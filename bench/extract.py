"""Extraction accuracy and speed: Sift's own render functions scored on the development set.

Runs the development set's scorer (shingle F1 against hand-made ground truth, see
docs/EXTRACTION.md §Measured on the development set) over Sift's `clean` and `text` renders,
and over the baseline measured in the same run: trafilatura alone, called with the options
clean mode uses, as Sift called it before clean kept links, images and code languages.
Prints F1 per data set and macro, ms/page for each, and Sift's ms/page ÷ the baseline's. The two
alternate page by page and each page keeps its best time over the rounds: this machine's speed
drifts by tens of percent within seconds.

    .venv/bin/python bench/extract.py [--data ../shared/extraction] [--limit N] [--rounds 2]
                                      [--mode clean|text|both|meta]

`--mode meta` times the metadata as the render child computes it instead: the parse (shared
with the extraction in a render) and the title and metadata read from the parsed page, apart,
per data set.

The data set stays outside the repository: pass its folder with `--data`.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trafilatura  # noqa: E402

from sift.fetch import pagemeta, render  # noqa: E402


def sift_page(html: str, url: str | None, mode: str) -> str:
    """The scorer's entry point: `python score.py bench.extract:sift_page --mode clean`."""
    rendered = render.render("html", html, mode, url or "")
    return "" if rendered.verdict == "bot_wall" else rendered.content


def sift_meta(html: str, url: str | None, mode: str = "meta") -> dict:
    """The scorer's metadata entry point: `score.py bench.extract:sift_meta --mode meta`.
    What the render child does for the metadata of an HTML page: parse the text, read the
    title, read the metadata. The parse is shared with the extraction in a render; `meta_times`
    below times the two apart."""
    tree = render._parse_html(html)
    if tree is None:
        return {}
    return _metadata(tree, url or "")


def _metadata(tree, url: str) -> dict:
    """The title and metadata as `render._render_html` reads them from the parsed page."""
    found = pagemeta.page_elements(tree)
    return pagemeta.page_metadata(tree, url, render.html_title(tree, found["title"]), found)


def meta_times(rows, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Per data set, per page: (parse ms, title and metadata ms), each the best over the
    rounds, timed as `sift_meta` runs them."""
    best: list[list[float]] = [[float("inf"), float("inf")] for _ in rows]
    for _ in range(rounds):
        for i, r in enumerate(rows):
            t0 = time.perf_counter()
            tree = render._parse_html(r["html"])
            t1 = time.perf_counter()
            if tree is not None:
                _metadata(tree, r["url"] or "")
            t2 = time.perf_counter()
            best[i][0] = min(best[i][0], (t1 - t0) * 1000)
            best[i][1] = min(best[i][1], (t2 - t1) * 1000)
    per: dict[str, list[tuple[float, float]]] = {}
    for r, (parse, meta) in zip(rows, best, strict=True):
        per.setdefault(r["dataset"], []).append((parse, meta))
    return per


def _p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


def print_meta_times(rows, rounds: int) -> None:
    per = meta_times(rows, rounds)
    per["all"] = [t for ds in list(per) for t in per[ds]]
    print("metadata as the render child computes it (ms/page, best of the rounds)")
    print(
        f"  {'data set':<10} {'parse':>7} {'p90':>7} {'meta':>7} {'p90':>7} {'both':>7} {'p90':>7}"
    )
    for ds, items in per.items():
        parse = [p for p, _ in items]
        meta = [m for _, m in items]
        both = [p + m for p, m in items]
        print(
            f"  {ds:<10} {statistics.fmean(parse):7.2f} {_p90(parse):7.2f} "
            f"{statistics.fmean(meta):7.2f} {_p90(meta):7.2f} "
            f"{statistics.fmean(both):7.2f} {_p90(both):7.2f}"
        )


def baseline_meta(html: str, url: str | None, mode: str = "meta") -> dict:
    """trafilatura's own metadata pass, for comparison."""
    doc = trafilatura.extract_metadata(html, default_url=url or None)
    if doc is None:
        return {}
    return {"title": doc.title, "author": doc.author, "published": doc.date}


def baseline_page(html: str, url: str | None, mode: str) -> str:
    """trafilatura alone, with clean mode's options: Markdown for clean, text for text."""
    return render.tidy(
        render.extract_main(html, url or "", "txt" if mode == "text" else "markdown") or ""
    )


def _scorer(data: Path):
    spec = importlib.util.spec_from_file_location("sift_bench_score", data / "score.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"no score.py in {data}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(score, rows, mode: str, rounds: int) -> dict[str, dict[str, tuple[float, float]]]:
    """Per function and data set: (F1, mean over pages of the page's best ms). The two
    functions alternate page by page (order swapped each round), so both see the same load."""
    fns = {"baseline": baseline_page, "sift": sift_page}
    best: dict[str, list[float]] = {name: [float("inf")] * len(rows) for name in fns}
    outs: dict[str, list[str]] = {name: [""] * len(rows) for name in fns}
    for rnd in range(rounds):
        order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
        for i, r in enumerate(rows):
            for name, fn in order:
                t0 = time.perf_counter()
                out = fn(r["html"], r["url"], mode) or ""
                best[name][i] = min(best[name][i], (time.perf_counter() - t0) * 1000)
                outs[name][i] = out
    result: dict[str, dict[str, tuple[float, float]]] = {}
    for name in fns:
        per: dict[str, list] = {}
        for i, r in enumerate(rows):
            out = outs[name][i]
            text = score.strip_markdown(out) if mode == "clean" else out
            per.setdefault(r["dataset"], []).append(
                (score.page_score(text, r["truth"]), best[name][i])
            )
        result[name] = {
            ds: (
                score.aggregate([s for s, _ in items])["f1"],
                statistics.fmean(m for _, m in items),
            )
            for ds, items in per.items()
        }
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "extraction"))
    ap.add_argument("--limit", type=int, default=0, help="pages per data set (0: all)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds; each page's best time is kept")
    ap.add_argument("--mode", choices=("clean", "text", "both", "meta"), default="both")
    a = ap.parse_args()
    score = _scorer(Path(a.data))
    rows = score.load(None, a.limit)
    if a.mode == "meta":
        print_meta_times(rows, a.rounds)
        return
    for mode in ("clean", "text") if a.mode == "both" else (a.mode,):
        best = run(score, rows, mode, a.rounds)
        print(f"mode {mode}")
        print(f"  {'data set':<10} {'F1 base':>8} {'F1 sift':>8} {'ms base':>8} {'ms sift':>8}")
        for ds in best["sift"]:
            (fb, mb), (fs, ms) = best["baseline"][ds], best["sift"][ds]
            print(f"  {ds:<10} {fb:8.3f} {fs:8.3f} {mb:8.1f} {ms:8.1f}")
        macro = {n: statistics.fmean(f for f, _ in v.values()) for n, v in best.items()}
        ms_all = {n: statistics.fmean(m for _, m in v.values()) for n, v in best.items()}
        print(
            f"  {'macro':<10} {macro['baseline']:8.3f} {macro['sift']:8.3f} "
            f"{ms_all['baseline']:8.1f} {ms_all['sift']:8.1f}   "
            f"ms ratio sift/baseline {ms_all['sift'] / ms_all['baseline']:.3f}"
        )


if __name__ == "__main__":
    main()
