"""The tests' own web site: an aiohttp app served on 127.0.0.1 by the tests themselves.

Routes cover what the pipeline must handle: articles, JSON, redirects (including to a loopback
address that is not allowed), slow pages, compression bombs, upstream errors, bot walls,
unsupported types, and a fake web archive for `recover`.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import time
import zlib
from pathlib import Path

from aiohttp import web
from aiohttp.abc import AbstractResolver

from tests import bombs
from tests.pdfs import make_pdf

PAGES = Path(__file__).parent / "fixtures" / "pages"
# What tech_article.html states about itself (meta tags and JSON-LD), as the envelope gives it.
TECH_ARTICLE_METADATA = json.loads((PAGES / "tech_article.meta.json").read_text("utf-8"))

PARAGRAPHS = [
    "The harbour authority confirmed on Tuesday that the northern breakwater will be rebuilt "
    "over the next three summers, after storms last winter opened a breach forty metres wide.",
    "Engineers said the new wall would use interlocking concrete units rather than the loose "
    "granite blocks that were placed there in the nineteenth century.",
    "Fishing crews, who have had to shelter in the southern basin since January, welcomed the "
    "decision but asked for a temporary barrier before the autumn gales arrive.",
    "The project is expected to cost about twelve million, shared between the port and the "
    "regional government, with work starting in May once the nesting season ends.",
]


def article_html(n: int = 0, *, words: int = 0) -> str:
    body = "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    if words:
        body += "<p>" + " ".join(f"word{i}" for i in range(words)) + "</p>"
    return f"""<!doctype html><html><head><title>Breakwater {n}</title></head><body>
<nav><a href="/">Home</a> <a href="/news">News</a> <a href="/sport">Sport</a></nav>
<div class="cookie-banner">We use cookies to improve your experience. Accept all cookies.</div>
<article><h1>Harbour breakwater to be rebuilt ({n})</h1>{body}
<h2>What happens next</h2><ul><li>Survey in March</li><li>Tender in April</li></ul>
</article>
<aside class="share">Share on social media</aside>
<section id="comments"><h3>Comments</h3><p>First! Great article, totally agree.</p></section>
<footer>Copyright Example Harbour News. <a href="/about">About us</a></footer>
</body></html>"""


HITS = web.AppKey("hits", list)
HIT_AT = web.AppKey("hit_at", list)  # (time.monotonic(), path and query) of every request
# What /robots.txt answers, changeable while the site runs: status, body, delay (seconds).
ROBOTS = web.AppKey("robots", dict)


def make_site(*, delay: float = 0.0, blocked_port: int = 1) -> web.Application:
    app = web.Application()
    hits: list[str] = []
    hit_at: list[tuple[float, str]] = []
    app[HITS] = hits
    app[HIT_AT] = hit_at
    robots_answer = {"status": 404, "body": "", "delay": 0.0}
    app[ROBOTS] = robots_answer

    @web.middleware
    async def record(request, handler):
        hits.append(request.path_qs)
        hit_at.append((time.monotonic(), request.path_qs))
        return await handler(request)

    app.middlewares.append(record)

    async def article(request):
        if delay:
            await asyncio.sleep(delay)
        n = int(request.match_info.get("n", 0))
        return web.Response(text=article_html(n), content_type="text/html", charset="utf-8")

    async def data(request):
        return web.json_response({"items": [{"id": 1, "name": "alpha"}, {"id": 2, "name": "beta"}]})

    async def plain(request):
        lines = [f"line {i}: {'needle' if i % 10 == 0 else 'hay'}" for i in range(1, 101)]
        return web.Response(text="\n".join(lines), content_type="text/plain")

    async def robots_txt(request):
        if robots_answer["delay"]:
            await asyncio.sleep(robots_answer["delay"])
        return web.Response(
            status=robots_answer["status"], text=robots_answer["body"], content_type="text/plain"
        )

    async def retry_after(request):
        code = int(request.match_info["code"])
        headers = {"Retry-After": request.query["after"]} if "after" in request.query else {}
        return web.Response(status=code, text="later", content_type="text/plain", headers=headers)

    async def page(request):
        """A fixture page from tests/fixtures/pages/ (links, images, code, JSON-LD metadata)."""
        name = request.match_info["name"]
        if not name.isidentifier():
            raise web.HTTPNotFound()
        path = PAGES / f"{name}.html"
        if not path.is_file():
            raise web.HTTPNotFound()
        return web.Response(text=path.read_text("utf-8"), content_type="text/html")

    async def redirect(request):
        to = request.query.get("to", "/article/1")
        raise web.HTTPFound(to)

    async def loop(request):
        n = int(request.match_info["n"])
        raise web.HTTPFound(f"/loop/{n + 1}")

    async def to_blocked(request):
        raise web.HTTPFound(f"http://127.0.0.2:{blocked_port}/secret")

    async def slow(request):
        await asyncio.sleep(float(request.query.get("s", "5")))
        return web.Response(text="late", content_type="text/plain")

    async def bomb(request):
        # 64 MiB of zeros, gzip-compressed to about 64 KiB.
        raw = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b"\0" * (1024 * 1024)
        body = b"".join(raw.compress(chunk) for _ in range(64)) + raw.flush()
        return web.Response(
            body=body, headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"}
        )

    async def small_gzip(request):
        return web.Response(
            body=gzip.compress(b"hello compressed world"),
            headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"},
        )

    async def status(request):
        code = int(request.match_info["code"])
        return web.Response(status=code, text=f"status {code}", content_type="text/plain")

    async def botwall(request):
        return web.Response(
            status=403,
            content_type="text/html",
            text="<html><title>Just a moment...</title>"
            "<div id='cf-chl-widget'>Checking your browser</div></html>",
        )

    async def image(request):
        return web.Response(body=b"\x89PNG\r\n\x1a\n" + b"\0" * 100, content_type="image/png")

    async def big(request):
        return web.Response(
            text=article_html(0, words=int(request.query.get("words", "50000"))),
            content_type="text/html",
        )

    async def hostile(request):
        kind = request.match_info["kind"]
        if kind == "pdf":
            return web.Response(body=bombs.pdf_bomb(), content_type="application/pdf")
        if kind == "html":
            return web.Response(body=bombs.html_bomb(), content_type="text/html")
        if kind == "deep.json":
            return web.Response(body=bombs.deep_json(), content_type="application/json")
        if kind == "haystack.txt":
            return web.Response(body=bombs.grep_haystack(), content_type="text/plain")
        if kind == "table.html":
            return web.Response(body=bombs.table_spans(), content_type="text/html")
        raise web.HTTPNotFound()

    async def doc_pdf(request):
        pages = [[f"Page {n} heading", f"Body text of page {n}."] for n in range(1, 6)]
        return web.Response(body=make_pdf(pages), content_type="application/pdf")

    async def script_only(request):
        return web.Response(
            text="<html><head><title>App</title><script src='/app.js'></script>"
            "</head><body><div id='root'></div><noscript>Enable JavaScript"
            "</noscript></body></html>",
            content_type="text/html",
        )

    async def wayback_available(request):
        url = request.query.get("url", "")
        if "nothing" in url:
            return web.json_response({"archived_snapshots": {}})
        host = request.host
        snap = f"http://{host}/web/20240102030405/{url}"
        return web.json_response(
            {
                "archived_snapshots": {
                    "closest": {
                        "available": True,
                        "url": snap,
                        "timestamp": "20240102030405",
                        "status": "200",
                    }
                }
            }
        )

    async def wayback_raw(request):
        return web.Response(text=article_html(99), content_type="text/html")

    app.router.add_get("/robots.txt", robots_txt)
    app.router.add_get("/retry-after/{code}", retry_after)
    app.router.add_get("/article/{n}", article)
    app.router.add_get("/data.json", data)
    app.router.add_get("/pages/{name}", page)
    app.router.add_get("/plain.txt", plain)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/loop/{n}", loop)
    app.router.add_get("/to-blocked", to_blocked)
    app.router.add_get("/slow", slow)
    app.router.add_get("/bomb", bomb)
    app.router.add_get("/gz", small_gzip)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/botwall", botwall)
    app.router.add_get("/image.png", image)
    app.router.add_get("/big", big)
    app.router.add_get("/doc.pdf", doc_pdf)
    app.router.add_get("/hostile/{kind}", hostile)
    app.router.add_get("/app", script_only)
    app.router.add_get("/wayback/available", wayback_available)
    app.router.add_get("/web/{ts:\\d+}id_/{orig:.*}", wayback_raw)
    return app


class FakeResolver(AbstractResolver):
    """Canned DNS answers: no test ever asks a real resolver about a real name."""

    def __init__(self, answers: dict[str, list[str]]):
        self.answers = answers
        self.asked: list[str] = []

    async def resolve(self, host, port=0, family=socket.AF_INET):
        self.asked.append(host)
        if host not in self.answers:
            raise OSError(f"fake resolver: no answer for {host}")
        return [
            {
                "hostname": host,
                "host": ip,
                "port": port,
                "family": socket.AF_INET6 if ":" in ip else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for ip in self.answers[host]
        ]

    async def close(self):
        pass
