"""The benchmarks' article site, run as its own process:
`site.py DELAY PAGES [HOST [HOSTS [ALSO [DATA]]]]`.

Prints its port on the first line of stdout, then serves `/a/{n}` (article n, after DELAY
seconds, plus `?s=SECONDS` when given), `/_first?path=…` (when that path was first requested,
`time.perf_counter`), `/_log` (the path and query of every request for an article, a bomb or
a big page, in arrival order, as JSON) and `/_spans` (each page request's path and query,
start and end). HOST is a loopback address (default 127.0.0.1); /robots.txt is a 404, so
every path is allowed, unless `SIFT_BENCH_ROBOTS=1`: then every address but HOST answers the
wildcard-heavy robots.txt of `tests.bombs.robots_wildcards`. HOSTS also serves 127.0.0.2 …
127.0.0.N on the same port, ALSO (comma-separated, may be empty) more loopback addresses.
DATA, when given, is a `.jsonl.gz` file of real pages (the development set's format: `html`
per line): page n is its line n, served as UTF-8, instead of a synthetic article.
`/hostile/KIND` serves the bombs of `tests/bombs.py`; `/t/…` the test suite's own site
(`tests.site.make_site`: redirects, `Retry-After`, the render-bomb table and the rest).
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import os
import sys
import time
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import article
from tests import bombs
from tests.site import make_site

HOSTILE = {
    "pdf": (bombs.pdf_bomb, "application/pdf"),
    "html": (bombs.html_bomb, "text/html"),
    "deep.json": (bombs.deep_json, "application/json"),
    "haystack.txt": (bombs.grep_haystack, "text/plain"),
    # 9 MB in all: under `[fetch] max_body`, so it is extracted, not refused.
    "canonical": (functools.partial(bombs.canonical_page, href_bytes=9_000_000), "text/html"),
    "terminal": (
        lambda: (
            f"<html><head><title>t{bombs.TERMINAL_CONTROLS}</title></head><body><article>"
            f"<h1>Head{bombs.TERMINAL_CONTROLS}</h1><p>{'The harbour wall. ' * 40}"
            f"{bombs.TERMINAL_CONTROLS}</p><pre>{bombs.TERMINAL_CONTROLS}</pre></article></body>"
            "</html>"
        ),
        "text/html",
    ),
}


def main() -> None:
    delay, pages = float(sys.argv[1]), int(sys.argv[2])
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    hosts = int(sys.argv[4]) if len(sys.argv) > 4 else 1  # also 127.0.0.2 … 127.0.0.N, one port
    also = [a for a in (sys.argv[5] if len(sys.argv) > 5 else "").split(",") if a]
    hostile_robots = os.environ.get("SIFT_BENCH_ROBOTS") == "1"
    data = sys.argv[6] if len(sys.argv) > 6 else ""
    if data:
        with gzip.open(data, "rt", encoding="utf-8") as lines:
            bodies = [json.loads(line)["html"].encode() for line in lines][:pages]
        pages = len(bodies)
    else:
        bodies = [article(n).encode() for n in range(pages)]
    first: dict[str, float] = {}
    log: list[str] = []
    spans: list[tuple[str, float, float]] = []

    async def page(request: web.Request) -> web.Response:
        start = time.perf_counter()
        first.setdefault(request.path_qs, start)
        log.append(request.path_qs)
        wait = delay + float(request.query.get("s", "0"))
        if wait:
            await asyncio.sleep(wait)
        n = int(request.match_info["n"]) % pages
        spans.append((request.path_qs, start, time.perf_counter()))
        return web.Response(body=bodies[n], content_type="text/html", charset="utf-8")

    @functools.cache
    def hostile_body(kind: str) -> bytes:
        body = HOSTILE[kind][0]()
        return body.encode() if isinstance(body, str) else body

    async def hostile(request: web.Request) -> web.Response:
        log.append(request.path_qs)
        kind = request.match_info["kind"]
        if kind not in HOSTILE:
            raise web.HTTPNotFound()
        return web.Response(body=hostile_body(kind), content_type=HOSTILE[kind][1])

    big = article(0, paragraphs=300).encode()

    async def robots(request: web.Request) -> web.Response:
        here = request.transport.get_extra_info("sockname")[0] if request.transport else host
        if hostile_robots and here != host:
            return web.Response(text=bombs.robots_wildcards(), content_type="text/plain")
        raise web.HTTPNotFound()

    async def big_page(request: web.Request) -> web.Response:
        log.append(request.path_qs)
        return web.Response(body=big, content_type="text/html", charset="utf-8")

    async def first_hit(request: web.Request) -> web.Response:
        return web.Response(text=repr(first.get(request.query["path"], float("nan"))))

    async def serve() -> None:
        app = web.Application()
        app.router.add_get("/a/{n}", page)
        app.router.add_get("/_first", first_hit)
        app.router.add_get("/_log", lambda request: web.json_response(log))
        app.router.add_get("/_spans", lambda request: web.json_response(spans))
        app.router.add_get("/hostile/{kind}", hostile)
        app.router.add_get("/big/{n}", big_page)
        app.router.add_get("/robots.txt", robots)
        app.add_subapp("/t", make_site())
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        for h in [f"127.0.0.{h}" for h in range(2, hosts + 1)] + also:
            await web.TCPSite(runner, h, port).start()
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
