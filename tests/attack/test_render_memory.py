"""Memory bombs render beside a good caller's page: the render pool's children together stay
within `[render] pool_memory`, the bombs fail 413 and the small page renders
(docs/SECURITY.md §The render pool's memory budget).

Real processes: a pool with its default budget and forked children. A 2.3 MiB page of tiny
paragraphs (`tests/bombs.html_bomb`) grows its child past 600 MiB of PSS on the way to its
render when nothing stops it (each child alone was allowed 512 MiB of address space, and six
of them at once held over 1 GiB in `bench/hostile.py`).

Bound held: the pool's PSS total (fork server and live children) stays within its budget plus
what busy children grow in about one sampling interval; every bomb fails with 413 within seconds;
the good caller's render succeeds.
"""

from __future__ import annotations

import asyncio
import time

from sift.config import RenderConfig
from sift.errors import TooLong
from sift.fetch import render, render_child, renderbudget
from sift.fetch.renderpool import RenderPool, _forkserver_pid
from tests.bombs import html_bomb

MIB = 1024 * 1024
SLACK = 64 * MIB  # two bombs' growth in about one sampling interval, and a killed child's pages
BOMB_SECONDS = 15.0  # each bomb is stopped long before this (its render alone took 27 s)


def _render(body: bytes):
    return render.render_body("html", body, "text/html", "clean", "http://bomb.test/")


async def test_memory_bombs_stay_within_the_pool_budget_and_a_good_page_renders():
    cfg = RenderConfig(demote_after=30)
    pool = RenderPool(cfg)
    peak = 0

    async def sample():
        nonlocal peak
        while True:
            # A child killed already is left out: its pages go back at the pace the loaded
            # kernel lets a dying process run, which is not the pool's to speed up.
            live = [c.pid for c in pool._all if not c.over_budget]
            pids = [*live, *([_forkserver_pid()] if pool.pids else [])]
            peak = max(peak, sum(renderbudget.sizes(p for p in pids if p).values()))
            await asyncio.sleep(0.01)

    sampler = asyncio.ensure_future(sample())
    started = time.monotonic()
    try:
        bombs = [pool.run("bomber", _render, html_bomb(), timeout=60) for _ in range(2)]
        good = pool.run("reader", _render, render_child._WARM_PAGE, timeout=60)
        *bombed, page = await asyncio.gather(*bombs, good, return_exceptions=True)
    finally:
        sampler.cancel()
        await pool.close()
    assert all(isinstance(b, TooLong) and b.status == 413 for b in bombed), bombed
    assert time.monotonic() - started < BOMB_SECONDS
    assert not isinstance(page, BaseException), page
    assert "paragraph of text" in page.content
    assert peak <= cfg.pool_memory + SLACK, peak / MIB
