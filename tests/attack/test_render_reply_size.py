"""What one target in flight holds in the serving process is bounded by construction
(docs/SECURITY.md §What one target in flight holds): the render child that makes a target's
content also greps it, picks a question's passages and cuts it to `[fetch] output_cap`, so no
reply from a child is larger than the cap, whatever the page, and a whole page never travels
back to be grepped.

A 1 MB page, served over loopback, fetched through the real pipeline and its real render
children; every reply frame the parent reads is measured as it is unpickled.
"""

from __future__ import annotations

import pytest
from aiohttp import web

from sift import config
from sift.auth import Caller
from sift.fetch import renderpool
from sift.fetch.pipeline import Pipeline
from sift.fetch.target import parse_target
from sift.store import open_store

OUTPUT_CAP = 20_000
REPLY_MAX = 4 * OUTPUT_CAP + 64 * 1024  # the cap in UTF-8 at worst, the title and metadata
LINES = 20_000
PAGE = "".join(
    f"line {i} of the page, a word here: {'needle' if i % 7 == 0 else 'hay'}\n"
    for i in range(LINES)
)
BIG = PAGE * 3  # over renderpool.OUT_OF_BAND
HTML = f"<html><head><title>Big</title></head><body><pre>{PAGE}</pre></body></html>"


@pytest.fixture
async def fetch(tmp_path, aiohttp_server, monkeypatch):
    replies: list[tuple[int, str]] = []  # each reply's size and what it carried
    real = renderpool._loads

    def measured(data: bytes):
        reply = real(data)
        if reply[-1] is not None:  # a new child's warm-up
            replies.append((len(data), type(reply[-1]).__name__))
        return reply

    monkeypatch.setattr(renderpool, "_loads", measured)

    async def page(request):
        kind = request.match_info["kind"]
        body, ctype = {"text": (PAGE, "text/plain"), "html": (HTML, "text/html")}.get(
            kind, (BIG, "text/plain")
        )
        return web.Response(text=body, content_type=ctype)

    app = web.Application()
    app.router.add_get("/{kind}", page)
    server = await aiohttp_server(app)
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(tmp_path)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [server.port]},
            "fetch": {"output_cap": OUTPUT_CAP},
            "cache": {"ttl": 0},
        }
    )
    pipeline = await Pipeline.open(cfg, open_store(cfg))

    async def go(kind: str, **options):
        replies.clear()
        target = parse_target({"url": f"http://127.0.0.1:{server.port}/{kind}", **options})
        envelope = await pipeline.fetch_target(Caller("big"), target)
        return envelope, list(replies)

    yield go
    await pipeline.close()
    pipeline.store.close()


@pytest.mark.parametrize(
    ("kind", "mode"), [("html", "raw"), ("html", "text"), ("html", "clean"), ("text", "raw")]
)
async def test_a_render_reply_is_no_larger_than_the_output_cap(fetch, kind, mode):
    envelope, replies = await fetch(kind, mode=mode)
    assert len(PAGE) > 40 * OUTPUT_CAP
    assert envelope["truncated"] is True
    assert envelope["chars"] <= OUTPUT_CAP
    assert [kind for _, kind in replies] == ["Narrowed"], replies
    assert max(size for size, _ in replies) <= REPLY_MAX, replies


async def test_grep_runs_in_the_child_that_rendered_the_page_and_counts_every_line(fetch):
    envelope, replies = await fetch("text", mode="raw", grep="needle")
    assert envelope["matches"] == len(range(0, LINES, 7))  # counted over the whole page
    assert envelope["content"].startswith("1: line 0 of the page")
    assert [kind for _, kind in replies] == ["Narrowed"], replies  # one round trip
    assert max(size for size, _ in replies) <= REPLY_MAX, replies


async def test_a_question_gets_its_passages_from_the_child_not_the_page(fetch):
    envelope, replies = await fetch("text", mode="raw", question="Where is line 700?")
    assert envelope["answer_by"] == "passages"
    assert "line 700 " in envelope["content"]
    assert [kind for _, kind in replies] == ["Narrowed"], replies
    assert max(size for size, _ in replies) <= REPLY_MAX, replies


async def test_the_body_travels_to_the_child_out_of_band_not_pickled_into_the_call(
    fetch, monkeypatch
):
    sent: list[list[int]] = []  # per request, each frame's size
    real = renderpool._request

    def recorded(fn, args, timeout):
        frames = real(fn, args, timeout)
        if fn.__name__ != "warm_up":  # a new child's first step
            sent.append([fn.__name__] + [sum(len(part) for part in frame) for frame in frames])
        return frames

    monkeypatch.setattr(renderpool, "_request", recorded)
    await fetch("big", mode="text", grep="needle")
    assert len(BIG) > renderpool.OUT_OF_BAND
    ((name, call, *buffers),) = sent
    assert name == "made" and call < 16 * 1024 and buffers == [len(BIG.encode())], sent
