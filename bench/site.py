"""The benchmarks' article site, as its own process: `site.py DELAY PAGES [HOST [HOSTS [DATA]]]`.

Prints its port on the first line of stdout, then serves `/a/{n}` (article n, after DELAY
seconds, plus `?s=SECONDS` when given), `/_first?path=…` (when that path was first requested,
`time.perf_counter`), `/_log` (every page request's path and query, in arrival order, as
JSON) and `/_spans` (each page request's path and query, start and end). HOST is a loopback
address (default 127.0.0.1); /robots.txt is a 404, so every path is allowed. DATA, when given,
is a `.jsonl.gz` file of real pages (the development set's format: `html` per line): page n is
its line n, served as UTF-8, instead of a synthetic article.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
import time
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import article
from tests import bombs

HOSTILE = {
    "pdf": (bombs.pdf_bomb, "application/pdf"),
    "html": (bombs.html_bomb, "text/html"),
    "deep.json": (bombs.deep_json, "application/json"),
    "haystack.txt": (bombs.grep_haystack, "text/plain"),
}


def main() -> None:
    delay, pages = float(sys.argv[1]), int(sys.argv[2])
    host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    hosts = int(sys.argv[4]) if len(sys.argv) > 4 else 1  # also 127.0.0.2 … 127.0.0.N, one port
    data = sys.argv[5] if len(sys.argv) > 5 else ""
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

    async def hostile(request: web.Request) -> web.Response:
        make, ctype = HOSTILE[request.match_info["kind"]]
        return web.Response(body=make(), content_type=ctype)

    big = article(0, paragraphs=300).encode()

    async def big_page(request: web.Request) -> web.Response:
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
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        for h in range(2, hosts + 1):
            await web.TCPSite(runner, f"127.0.0.{h}", port).start()
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
