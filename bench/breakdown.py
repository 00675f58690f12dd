"""Where one target's milliseconds go, on real pages: render steps, the child round trip, and a
profile of the worker and the API while they serve the development set's pages.

Four parts, each printed with what it measured against (docs/BENCHMARKS.md §Where each
millisecond goes):

1. The render child's work, step by step, in this process on the same pages (decode, parse,
   title, metadata, code drop, extraction, verdict, matching, Markdown; text mode's exact
   code), each page's best of `--rounds`, beside `render_body` whole.
2. The round trip: `render_body` through a render child ÷ in this process, alternated page by
   page (pickling, socket, child wake-up, result unpickling), and a no-work step's trip.
3. Real `sift serve` + `sift-worker` under cProfile (`bench/profiled.py`) on a loopback site
   serving the same pages: a 32-target drain and serial `/v1/fetch` calls, alternated with the
   bare aiohttp + trafilatura loop, then each process's time per target by step. Time in a
   coroutine counts while it runs on the event loop (what the step costs the process, not what
   it waits); the profiler slows the processes, so compare rows, not the drain's wall time.
4. The timelines: a real `sift-worker` with each step of a drained target timed by the
   wall clock (`bench/timeline.py`: before the download, the download, the render round trip,
   the store, the gaps between), beside the bare loop's download and extraction per page, on
   the same pages (the synthetic articles with `--synthetic`), at `--delay`; then serial
   `/v1/fetch` calls with the real `sift serve`'s pipeline, download and render timed the same
   way, and what the call costs outside the pipeline.

    .venv/bin/python bench/breakdown.py [--data ../shared/extraction/dev.jsonl.gz] [--pages 32]
                                        [--rounds 3] [--delay 0] [--parts 1234] [--synthetic]

`--synthetic`: the drain bench's 100 KB articles (`bench.common.article`), fetched from the bench
site over loopback, instead of the data set (parts 1, 2 and 4). Part 1 also times trafilatura alone
on each page's text, the drain's bare loop, and gives `clean` ÷ that.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lxml.etree  # noqa: E402
import orjson  # noqa: E402
import trafilatura  # noqa: E402

from bench.common import (  # noqa: E402
    JobWatch,
    Sift,
    Site,
    bare_loop,
    bare_pages,
    show,
    synthetic_pages,
)
from bench.fetch import sift_calls  # noqa: E402
from sift.config import RenderConfig  # noqa: E402
from sift.fetch import contenttype, htmlmd, mainblocks, pagemeta, render  # noqa: E402
from sift.fetch.renderpool import RenderPool  # noqa: E402

CTYPE = "text/html; charset=utf-8"


def load_pages(data: Path, n: int) -> list[dict]:
    """`n` pages spread evenly over the file (every data set in it)."""
    with gzip.open(data, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    step = max(1, len(rows) // n)
    return rows[::step][:n]


def steps_of(html: bytes, url: str) -> dict[str, float]:
    """`render._render_html`'s clean path (and text mode's extra), one step at a time, in ms."""
    out: dict[str, float] = {}
    t = time.perf_counter

    def lap(name: str, t0: float) -> float:
        now = t()
        out[name] = out.get(name, 0.0) + (now - t0) * 1000
        return now

    t0 = t()
    text = contenttype.decode(html, CTYPE)
    t0 = lap("decode", t0)
    tree = render._parse_html(text)
    t0 = lap("parse", t0)
    title = render.html_title(tree)
    t0 = lap("title", t0)
    pagemeta.page_metadata(tree, url, title)
    t0 = lap("metadata", t0)
    render._drop_code(tree)
    t0 = lap("code drop", t0)
    extracted = htmlmd.tidy(render.extract_main(tree, url, "txt") or "")
    t0 = lap("extraction (trafilatura)", t0)
    render._verdict(extracted, text, tree, title)
    t0 = lap("verdict", t0)
    if len(extracted) >= render.SHORT_EXTRACT:
        base = htmlmd.base_url(tree, url)
        main = mainblocks.main_tree(tree, extracted)
        t0 = lap("matching (mainblocks)", t0)
        htmlmd.to_markdown(main, base, drop=(), links=True, images=True)
        t0 = lap("Markdown", t0)
        render._with_exact_code(extracted, tree)
        lap("text mode: exact code", t0)
    return out


def part_render(pages: list[dict], rounds: int) -> None:
    best: dict[str, list[float]] = {}
    whole = [float("inf")] * len(pages)
    alone = [float("inf")] * len(pages)
    for _ in range(rounds):
        for i, p in enumerate(pages):
            body, url = p["html"].encode(), p["url"] or ""
            for name, ms in steps_of(body, url).items():
                row = best.setdefault(name, [float("inf")] * len(pages))
                row[i] = min(row[i], ms)
            t0 = time.perf_counter()
            render.render_body("html", body, CTYPE, "clean", url)
            t1 = time.perf_counter()
            render.extract_main(p["html"], url, "txt")  # the bare loop's extraction
            alone[i] = min(alone[i], (time.perf_counter() - t1) * 1000)
            whole[i] = min(whole[i], (t1 - t0) * 1000)
    total = statistics.fmean(whole)
    rows = []
    for name, row in best.items():
        ms = sum(v for v in row if v != float("inf")) / len(pages)
        rows.append((name, f"{ms:6.2f} ms  {ms / total:6.1%}"))
    rows.append(("render_body, clean, whole", f"{total:6.2f} ms  100.0%"))
    bare = statistics.fmean(alone)
    rows.append(
        ("trafilatura alone on the text (the bare loop's)", f"{bare:6.2f} ms  ÷ {total / bare:.3f}")
    )
    show(f"1. the render child's work per page (mean of each page's best of {rounds})", rows)


async def part_trip(pages: list[dict], rounds: int) -> None:
    pool = RenderPool(RenderConfig())
    here, there, empty = [], [], []
    try:
        pool.prestart()
        await pool._warming
        for _ in range(rounds):
            for p in pages:
                args = ("html", p["html"].encode(), CTYPE, "clean", p["url"] or "")
                t0 = time.perf_counter()
                render.render_body(*args)
                t1 = time.perf_counter()
                await pool.run("bench", render.render_body, *args, timeout=60)
                t2 = time.perf_counter()
                await pool.run("bench", len, args[1], timeout=60)
                t3 = time.perf_counter()
                here.append(t1 - t0)
                there.append(t2 - t1)
                empty.append(t3 - t2)
    finally:
        await pool.close()
    diff = [(b - a) * 1000 for a, b in zip(here, there, strict=True)]
    show(
        f"2. render round trip ({len(here)} renders, alternated, medians)",
        [
            ("render_body in this process", f"{statistics.median(here) * 1000:.2f} ms"),
            ("render_body through a render child", f"{statistics.median(there) * 1000:.2f} ms"),
            ("difference, median of pairs (the trip)", f"{statistics.median(diff):.2f} ms"),
            ("no-work step (len of the body) trip", f"{statistics.median(empty) * 1000:.2f} ms"),
        ],
    )


# Part 3: (label, file suffix, function name) summed as cumulative time in each process.
WORKER_ROWS = [
    ("download (HttpClient.get)", "sift/fetch/http.py", "get"),
    ("robots check", "sift/fetch/robots.py", "check"),
    ("room: gates acquire", "sift/gates/__init__.py", "acquire"),
    ("room: host pacing (politeness)", "sift/fetch/pipeline.py", "_pace"),
    ("room: admit (gate probe)", "worker/drain.py", "_admit"),
    ("content cache get/put", "sift/store/cache.py", None),
    ("render trip, parent side (_Child.call)", "sift/fetch/renderpool.py", "call"),
    ("  of which pickling the request", "sift/fetch/renderpool.py", "_request"),
    ("  of which unpickling the result", "sift/fetch/renderpool.py", "_loads"),
    ("envelope caps (bounded)", "sift/fetch/envelope.py", "bounded"),
    ("fetch log line", "sift/log.py", "fetch_event"),
    ("claim (Runner._take)", "worker/drain.py", "_take"),
    ("store write + chained claim (settle)", "worker/settle.py", "settle"),
    ("  of which the results' JSON", "sift/batch/wire.py", None),
    ("scheduler decide", "worker/scheduler.py", None),
    ("whole pipeline (Pipeline.fetch_target)", "sift/fetch/pipeline.py", "fetch_target"),
    ("event loop: waiting in select (idle)", "selectors.py", "select"),
]
API_ROWS = [
    ("request handling, whole (fetch route)", "sift/api/fetch_routes.py", None),
    ("auth and middleware", "sift/api/middleware.py", None),
    ("download (HttpClient.get)", "sift/fetch/http.py", "get"),
    ("room: gates acquire", "sift/gates/__init__.py", "acquire"),
    ("render trip, parent side (_Child.call)", "sift/fetch/renderpool.py", "call"),
    ("envelope caps (bounded)", "sift/fetch/envelope.py", "bounded"),
    ("fetch log line", "sift/log.py", "fetch_event"),
    ("whole pipeline (Pipeline.fetch_target)", "sift/fetch/pipeline.py", "fetch_target"),
    ("event loop: waiting in select (idle)", "selectors.py", "select"),
]


def profile_rows(path: Path, rows: list, targets: int) -> list[tuple[str, str]]:
    stats = pstats.Stats(str(path)).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
    total = sum(v[2] for v in stats.values())
    out = [("process total, idle and start-up included", f"{total / targets * 1000:7.2f} ms")]
    for label, suffix, name in rows:
        ct = 0.0
        for (file, _line, fn), (_cc, _nc, tt, cum, _callers) in stats.items():
            if not file.endswith(suffix) or (name is not None and fn != name):
                continue
            # A file's whole time: its functions' own time (their callees outside the file
            # are not counted); one function: its cumulative time at its outermost calls.
            ct += tt if name is None else cum
        out.append((label, f"{ct / targets * 1000:7.2f} ms"))
    return out


def part_processes(data: Path, n: int, rounds: int, delay: float) -> None:
    out = Path(tempfile.mkdtemp(prefix="sb-prof-", dir="/tmp"))
    wrap = [sys.executable, str(ROOT / "bench" / "profiled.py"), str(out / "{name}.prof"), "--"]
    site = Site(delay=delay, pages=n, data=str(data)).start()
    sift = Sift(site.port, cache={"ttl": 0}, wrap={"api": wrap, "worker": wrap}).start()
    drains, bares, fetches, fbares = [], [], [], []
    targets = 0
    try:
        watch = JobWatch(sift)
        for r in range(rounds):
            bares.append(asyncio.run(bare_loop([site.url(i, f"b{r}") for i in range(n)])))
            t0 = time.perf_counter()
            job = sift.request(
                "POST", "/v1/batch", {"targets": [{"url": site.url(i, f"s{r}")} for i in range(n)]}
            )["job_id"]
            drains.append(watch.wait_terminal(job) - t0)
            targets += n
            fbares.append(asyncio.run(bare_loop([site.url(i, f"fb{r}") for i in range(n)])))
            t0 = time.perf_counter()
            for i in range(n):
                sift.request("POST", "/v1/fetch", {"url": site.url(i, f"f{r}")})
            fetches.append(time.perf_counter() - t0)
    finally:
        sift.stop()
        site.stop()
    show(
        f"3. real processes under cProfile, {n} pages × {rounds} rounds, {delay * 1000:g} ms delay",
        [
            ("bare loop, best round", f"{min(bares) * 1000:.0f} ms"),
            ("drain submit → done, best round (profiled)", f"{min(drains) * 1000:.0f} ms"),
            ("bare loop before the fetches, best round", f"{min(fbares) * 1000:.0f} ms"),
            ("serial /v1/fetch, best round (profiled)", f"{min(fetches) * 1000:.0f} ms"),
        ],
    )
    show(
        "3a. worker process, per target (event loop time)",
        profile_rows(out / "worker.prof", WORKER_ROWS, targets),
    )
    show(
        "3b. API process, per /v1/fetch (event loop time)",
        profile_rows(out / "api.prof", API_ROWS, targets),
    )
    print(f"\nprofiles: {out} (python -m pstats FILE)")


TIMELINE_ROWS = (  # (label, from (step, "b"|"e"), to)
    ("before the download: gates, robots.txt, host pace", ("target", "b"), ("download", "b")),
    ("download (`HttpClient.get`)", ("download", "b"), ("download", "e")),
    ("download's end to the render's start", ("download", "e"), ("render", "b")),
    ("render round trip (`RenderPool.run`)", ("render", "b"), ("render", "e")),
    ("render's end to the store", ("render", "e"), ("store", "b")),
    ("store with the chained claim (`settle`)", ("store", "b"), ("store", "e")),
    ("store's end to the next target's start", ("store", "e"), ("next", "b")),
)


def timeline_targets(events: list) -> list[dict]:
    """Each drained target's steps: the last time each began and ended within the target (a
    first fetch of an origin also downloads and parses its robots.txt), and the next target's
    start; the first target (the warm-up job's) is left out."""
    targets: list[dict] = []
    for step, edge, at in events:
        if step == "target" and edge == "b":
            if targets:
                targets[-1][("next", "b")] = at
            targets.append({})
        if targets:
            targets[-1][(step, edge)] = at
    return [t for t in targets[1:] if all(k in t for _, a, b in TIMELINE_ROWS for k in (a, b))]


def part_timeline(data: Path | None, n: int, rounds: int, delay: float) -> None:
    out = Path(tempfile.mkdtemp(prefix="sb-tl-", dir="/tmp"))
    wrap = [sys.executable, str(ROOT / "bench" / "timeline.py"), str(out / "{name}.json"), "--"]
    site = Site(delay=delay, pages=n, data=str(data) if data else "").start()
    sift = Sift(site.port, cache={"ttl": 0}, wrap={"worker": wrap, "api": wrap}).start()
    bares, drains, split, calls, fbares = [], [], [], [], []
    try:
        watch = JobWatch(sift)
        warm = sift.request("POST", "/v1/batch", {"targets": [{"url": site.url(0, "warm")}]})
        watch.wait_terminal(warm["job_id"])
        sift.request("POST", "/v1/fetch", {"url": site.url(0, "warm")})
        for r in range(rounds):
            seconds, pages = asyncio.run(bare_pages([site.url(i, f"b{r}") for i in range(n)]))
            split += pages
            bares.append(seconds)
            t0 = time.perf_counter()
            job = sift.request(
                "POST", "/v1/batch", {"targets": [{"url": site.url(i, f"s{r}")} for i in range(n)]}
            )["job_id"]
            drains.append(watch.wait_terminal(job) - t0)
            fbares.append(asyncio.run(bare_loop([site.url(i, f"fb{r}") for i in range(n)])))
            calls += asyncio.run(sift_calls(sift, [site.url(i, f"f{r}") for i in range(n)]))[1]
    finally:
        sift.stop()
        site.stop()
    med = statistics.median
    targets = timeline_targets(orjson.loads((out / "worker.json").read_bytes()))
    # The last target of each round waits for the next round's submit: its row is left out.
    cycles = [t for t in targets if t[("next", "b")] - t[("store", "e")] < 1.0]
    rows = [
        (label, f"{med([(t[b] - t[a]) * 1000 for t in cycles]):6.2f} ms")
        for label, a, b in TIMELINE_ROWS
    ]
    cycle = med([(t[("next", "b")] - t[("target", "b")]) * 1000 for t in cycles])
    bare_rows = [
        ("bare loop: download", f"{med([a * 1000 for a, _ in split]):6.2f} ms"),
        (
            "bare loop: extraction (trafilatura on the text)",
            f"{med([b * 1000 for _, b in split]):6.2f} ms",
        ),
        ("bare loop: one page", f"{med([(a + b) * 1000 for a, b in split]):6.2f} ms"),
    ]
    rows += [("one target, start to next start", f"{cycle:6.2f} ms"), *bare_rows]
    rows.append(
        (
            "drain efficiency (bare ÷ submit → done), per round",
            ", ".join(f"{b / d:.3f}" for b, d in zip(bares, drains, strict=True)),
        )
    )
    show(
        f"4. the drain's timeline (wall clock, median over {len(cycles)} targets), {n} pages × "
        f"{rounds} rounds, {delay * 1000:g} ms delay",
        rows,
    )
    spans = api_spans(orjson.loads((out / "api.json").read_bytes()))[1:]  # the warm-up's first
    show(
        f"4b. serial /v1/fetch (wall clock, median over {len(spans)} calls)",
        [
            (
                "the API's pipeline (`Pipeline.fetch_target`)",
                f"{med([s['pipeline'] for s in spans]):6.2f} ms",
            ),
            ("  of it the download", f"{med([s['download'] for s in spans]):6.2f} ms"),
            ("  of it the render round trip", f"{med([s['render'] for s in spans]):6.2f} ms"),
            ("the client's whole call", f"{med(calls) * 1000:6.2f} ms"),
            (
                "  outside the pipeline (HTTP, auth, JSON, both ends)",
                f"{(med(calls) * 1000 - med([s['pipeline'] for s in spans])):6.2f} ms",
            ),
            *bare_rows,
            (
                "throughput ÷ bare, per round",
                ", ".join(
                    f"{b / sum(calls[r * n : (r + 1) * n]):.3f}" for r, b in enumerate(fbares)
                ),
            ),
        ],
    )


def api_spans(events: list) -> list[dict]:
    """Each `/v1/fetch` pipeline's wall time and its last download and render, in ms."""
    spans: list[dict] = []
    begun: dict[str, float] = {}
    for step, edge, at in events:
        if edge == "b":
            begun[step] = at
            if step == "pipeline":
                spans.append({"download": 0.0, "render": 0.0})
        elif spans and step in ("pipeline", "download", "render") and step in begun:
            spans[-1][step] = (at - begun[step]) * 1000
    return [s for s in spans if "pipeline" in s]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "extraction" / "dev.jsonl.gz"))
    ap.add_argument("--pages", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=float, default=0.0, help="server delay, seconds")
    ap.add_argument("--parts", default="1234")
    ap.add_argument(
        "--synthetic",
        action="store_true",
        help="the drain bench's articles, fetched from the bench site (parts 1, 2 and 4)",
    )
    a = ap.parse_args()
    pages = synthetic_pages(a.pages) if a.synthetic else load_pages(Path(a.data), a.pages)
    source = "the bench site's synthetic articles" if a.synthetic else a.data
    print(
        f"Python {platform.python_version()}, trafilatura {trafilatura.__version__}, "
        f"lxml {'.'.join(map(str, lxml.etree.LXML_VERSION))}; {len(pages)} pages of {source} "
        f"({sum(len(p['html'].encode()) for p in pages) // len(pages) // 1024} KB mean); "
        f"rounds {a.rounds}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    if "1" in a.parts:
        part_render(pages, a.rounds)
    if "2" in a.parts:
        asyncio.run(part_trip(pages, a.rounds))
    if "4" in a.parts:
        part_timeline(None if a.synthetic else Path(a.data), a.pages, a.rounds, a.delay)
    if "3" in a.parts and not a.synthetic:
        with (
            tempfile.NamedTemporaryFile(suffix=".jsonl.gz", delete=False) as f,
            gzip.open(f, "wt", encoding="utf-8") as z,
        ):
            for p in pages:
                z.write(json.dumps({"html": p["html"]}) + "\n")
        try:
            part_processes(Path(f.name), len(pages), a.rounds, a.delay)
        finally:
            os.unlink(f.name)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
