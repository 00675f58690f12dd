"""Generated hostile HTML shapes hold the render bounds by construction (docs/SECURITY.md
§Bounds on upstream bytes): nested tables with row and column spans, deep nesting, many and
long attributes, many links, entity declarations that expand, served over loopback and fetched
through the real pipeline and its real render children.

Whatever the shape, a fetch answers within `[render] timeout` plus a margin (a success or a
413 / 422 / 504 of its own), its content stays within `[fetch] output_cap`, and this process
(the one that serves fetches) keeps its RSS bounded: nothing of the page is parsed here.
The examples are few and the render budget short, so the file runs in well under a minute.
"""

from __future__ import annotations

import asyncio
import threading
import time

import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sift import config
from sift.auth import Caller
from sift.errors import TargetError
from sift.fetch.pipeline import Pipeline
from sift.fetch.target import parse_target
from sift.store import open_store

RENDER_TIMEOUT = 2.0
MARGIN = 3.0  # the download, the reply, a loaded machine
OUTPUT_CAP = 20_000
RSS_GROWTH_MAX = 150 * 1024 * 1024
OWN_FAILURES = (413, 422, 504)
TABLE = "<table>" + "<tr><td rowspan=65534 colspan=1000>a</td></tr>" * 300  # 13.8 KB, a minute
SHAPES_SETTINGS = settings(
    max_examples=14,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Served:
    """A loopback site and a pipeline on an event loop of their own, for a sync property test
    (hypothesis runs each example as a plain call)."""

    def __init__(self, state_dir):
        self.page: tuple[bytes, str] = (b"", "text/html")
        self.n = 0
        self.baseline = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self._start(state_dir))

    def call(self, coro, timeout: float = 120.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self, state_dir) -> None:
        app = web.Application()

        async def page(request):
            body, ctype = self.page
            return web.Response(body=body, headers={"Content-Type": ctype})

        app.router.add_get("/{n}", page)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        cfg = config.from_dict(
            {
                "store": {"state_dir": str(state_dir)},
                "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [self.port]},
                "fetch": {"timeout": 10, "output_cap": OUTPUT_CAP},
                "cache": {"ttl": 0},
                "render": {"timeout": RENDER_TIMEOUT},
            }
        )
        self.pipeline = await Pipeline.open(cfg, open_store(cfg))

    async def fetch(self, options: dict) -> tuple[int, dict]:
        self.n += 1
        target = parse_target({"url": f"http://127.0.0.1:{self.port}/{self.n}", **options})
        try:
            return 200, await self.pipeline.fetch_target(Caller("shapes"), target)
        except TargetError as e:
            return e.status, e.envelope()

    async def _stop(self) -> None:
        await self.pipeline.close()
        self.pipeline.store.close()
        await self.runner.cleanup()

    def close(self) -> None:
        self.call(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("shapes"))
    s.call(s.fetch({}))  # the pool's first child is up before the first example
    s.baseline = rss()
    yield s
    s.close()


# -- the shapes -------------------------------------------------------------------------------

_span = st.sampled_from([1, 2, 7, 1000, 65534])
_word = st.sampled_from(["a", "word", "x" * 40, "&amp;", "&#x1F600;", "&lt;b&gt;", "é"])


@st.composite
def span_tables(draw) -> str:
    rows = draw(st.integers(1, 300))
    depth = draw(st.integers(1, 4))
    cell = f"<td rowspan={draw(_span)} colspan={draw(_span)}>{draw(_word)}</td>"
    inner = "<table>" + f"<tr>{cell * draw(st.integers(1, 4))}</tr>" * rows + "</table>"
    for _ in range(depth - 1):
        inner = f"<table><tr><td rowspan={draw(_span)}>{inner}</td></tr></table>"
    return inner


@st.composite
def deep_nesting(draw) -> str:
    tag = draw(st.sampled_from(["div", "b", "li", "blockquote", "span", "table"]))
    depth = draw(st.integers(100, 20_000))
    return f"<{tag}>" * depth + draw(_word) + f"</{tag}>" * draw(st.integers(0, depth))


@st.composite
def many_attributes(draw) -> str:
    count = draw(st.integers(100, 5000))
    attrs = " ".join(f"data-a{i}='{draw(_word)}'" for i in range(count))
    return f"<p {attrs}>text</p>" * draw(st.integers(1, 20))


@st.composite
def long_attributes(draw) -> str:
    value = draw(_word) * draw(st.integers(1000, 60_000))
    name = draw(st.sampled_from(["href", "title", "alt", "content", "class"]))
    return (
        f"<link rel=canonical href='{value}'><meta name=description content='{value}'>"
        f"<a {name}='{value}'>x</a><img src='{value}' alt='{value}'>"
    )


@st.composite
def many_links(draw) -> str:
    count = draw(st.integers(100, 20_000))
    href = draw(st.sampled_from(["/a", "http://example.test/" + "p" * 200, "#x", "?q=1"]))
    return "".join(f"<a href='{href}{i}'>{draw(_word)}</a>" for i in range(count))


@st.composite
def entities(draw) -> str:
    width = draw(st.integers(2, 10))
    levels = draw(st.integers(1, 8))
    decls = ['<!ENTITY e0 "' + "lol" * draw(st.integers(1, 100)) + '">']
    decls += [f'<!ENTITY e{i} "' + f"&e{i - 1};" * width + '">' for i in range(1, levels)]
    body = f"&e{levels - 1};" * draw(st.integers(1, 50)) + "&amp;" * draw(st.integers(0, 50_000))
    return "<!DOCTYPE html [" + "".join(decls) + "]>" + body


_shape = st.one_of(
    span_tables(), deep_nesting(), many_attributes(), long_attributes(), many_links(), entities()
)
_ctype = st.sampled_from(
    ["text/html; charset=utf-8", "application/xhtml+xml", "application/rss+xml", "text/html"]
)
_options = st.fixed_dictionaries(
    {"mode": st.sampled_from(["clean", "markdown", "text", "links"])},
    optional={"grep": st.sampled_from(["a", "x+", "(a|b)*c"])},
)


@SHAPES_SETTINGS
@example(shapes=[TABLE], ctype="text/html", options={"mode": "clean"})
@given(shapes=st.lists(_shape, min_size=1, max_size=3), ctype=_ctype, options=_options)
def test_hostile_html_shapes_keep_the_render_bounds(served, shapes, ctype, options):
    body = ("<html><head><title>t</title></head><body>" + "".join(shapes)).encode()
    served.page = (body, ctype)
    started = time.monotonic()
    status, envelope = served.call(served.fetch(options))
    elapsed = time.monotonic() - started
    assert elapsed < RENDER_TIMEOUT + MARGIN, (elapsed, status, len(body))
    verdict_failed = status == 502 and envelope.get("verdict") is not None  # an empty page
    assert status == 200 or status in OWN_FAILURES or verdict_failed, envelope
    if status == 200:
        assert envelope["chars"] == len(envelope["content"]) <= OUTPUT_CAP
        rest = {k: v for k, v in envelope.items() if k not in ("content", "metadata")}
        assert len(orjson.dumps(rest)) < 16 * 1024
    assert rss() - served.baseline < RSS_GROWTH_MAX
