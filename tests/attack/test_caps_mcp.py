"""MCP answers stay within `max_length` whatever the upstream sent (docs/MCP.md §Tools): every
heading field is clipped, and a heading never takes more than half of `max_length`, so an
8 KB `Content-Type`, a long title and a long URL leave room for content at the smallest
`max_length`. Through the real MCP stdio server, API and worker.

Bound held: every answer at most `max_length` characters, with content in it.
"""

from __future__ import annotations

import pytest

from sift.mcp_server import paging
from sift.mcp_server.views import document, heading
from tests.attack.caps_site import HostileSite
from tests.e2e.procs import SiftProcs
from tests.e2e.test_mcp import call, mcp_session

pytestmark = pytest.mark.e2e

HUGE = "x" * 8192
BODY = "Harbour breakwater words. " * 200


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    page = f"<html><head><title>{'T' * 2000}</title></head><body><p>{BODY}</p></body></html>"
    site.add("/" + "p" * 2000, page, "text/html; " + "q=" + "y" * 7000)
    yield site
    site.close()


@pytest.fixture(scope="module")
def api(hostile):
    with SiftProcs([hostile.port]) as procs:
        yield procs


@pytest.mark.parametrize("max_length", [paging.MAX_LENGTH_MIN, 1500, 5000])
def test_a_heading_of_huge_fields_fits_the_smallest_max_length(max_length):
    env = {
        "url": "https://example.org/" + HUGE,
        "title": HUGE,
        "content_type": HUGE,
        "mode": HUGE,
        "source": "archive",
        "archived_at": HUGE,
        "pages": {"returned": HUGE, "total": 3},
        "matches": 2,
        "answer_by": HUGE,
        "metadata": {"author": HUGE, "published": HUGE, "site_name": HUGE},
        "truncated": True,
        "hint": HUGE,
        "content": BODY,
    }
    answer = paging.page(heading(env), document(env), 0, max_length, "fetch")
    assert len(answer) <= max_length
    assert "Harbour breakwater words." in answer


async def test_an_8kb_content_type_through_mcp_fetch_at_the_smallest_max_length(api, hostile):
    url = hostile.url("/" + "p" * 2000)
    async with mcp_session(api) as s:
        result, text = await call(s, "fetch", {"url": url, "max_length": paging.MAX_LENGTH_MIN})
    assert not result.is_error, text
    assert len(text) <= paging.MAX_LENGTH_MIN
    assert "Harbour breakwater words." in text
