"""The extractor's reading follows what the page says it is (docs/EXTRACTION.md §Page types)."""

from __future__ import annotations

import json

import pytest

from sift.fetch import pagemeta, pagetype
from sift.fetch.render import _parse_html, extract_main, render, tidy

URL = "https://acme.example/services"
HEADING = "Who we help, part 0"
QUOTE = "Acme has looked after our office network for six years"


def _ld(*types: str) -> str:
    graph = [{"@type": t, "name": f"a {t}"} for t in types]
    body = json.dumps({"@context": "https://schema.org", "@graph": graph})
    return f'<script type="application/ld+json">{body}</script>'


def _page(head: str = "") -> str:
    """A service page: rows of headed paragraphs and one short `article` (a client's quote)."""
    rows = "".join(
        f'<div class="row"><h2>Who we help, part {i}</h2><p>Owners of firms of type {i} who '
        "need their systems planned, built and looked after, with one named engineer and a "
        "fixed price agreed before any work starts.</p></div>"
        for i in range(6)
    )
    links = "".join(f'<li><a href="/p{i}">Page {i}</a></li>' for i in range(10))
    return (
        f"<html><head><title>Acme services</title>{head}</head><body>"
        f"<header><nav><ul>{links}</ul></nav></header><div id='page'>{rows}"
        f'<article class="quote"><p>{QUOTE} and we have never lost a day of work to it.</p>'
        "</article></div><footer><p>Acme Ltd, 1 High Street.</p></footer></body></html>"
    )


def _focus(head: str) -> str:
    return pagetype.extraction_focus(pagemeta.page_elements(_parse_html(_page(head))))


def test_website_page_is_read_balanced():
    assert _focus('<meta property="og:type" content="website">') == pagetype.BALANCED
    assert _focus(_ld("WebPage", "Organization")) == pagetype.BALANCED
    assert _focus(_ld("WebSite")) == pagetype.BALANCED


def test_forum_thread_is_read_balanced():
    assert _focus(_ld("DiscussionForumPosting", "Person")) == pagetype.BALANCED


def test_type_as_list_is_read():
    body = json.dumps({"@type": ["WebPage", "ItemPage"], "name": "x"})
    assert _focus(f'<script type="application/ld+json">{body}</script>') == pagetype.BALANCED


@pytest.mark.parametrize(
    "declared", ["NewsArticle", "BlogPosting", "FAQPage", "Question", "Product"]
)
def test_article_question_or_product_type_keeps_recall(declared):
    assert _focus('<meta property="og:type" content="website">' + _ld(declared)) == pagetype.RECALL
    assert _focus(_ld("WebPage", declared)) == pagetype.RECALL


def test_undeclared_page_keeps_recall():
    assert _focus("") == pagetype.RECALL
    assert _focus('<meta property="og:type" content="article">') == pagetype.RECALL
    assert _focus(_ld("Organization", "BreadcrumbList")) == pagetype.RECALL


def test_json_ld_read_up_to_its_bound():
    filler = f'<script type="application/ld+json">"{"x" * pagetype.JSON_LD_SCAN_MAX}"</script>'
    assert _focus(filler + _ld("WebPage")) == pagetype.RECALL


def test_declared_website_page_is_read_balanced_in_text_and_clean():
    """Both modes use the balanced reading on a declared website page, the recall reading on
    the same page undeclared. On this page the two differ: the balanced reading starts from the
    `article`, finds it covers little of the page and retries, and its retry keeps the rows'
    paragraphs without their headings."""
    html = _page('<meta property="og:type" content="website">')
    balanced = tidy(extract_main(_parse_html(html), URL, "txt", pagetype.BALANCED) or "")
    recall = tidy(extract_main(_parse_html(html), URL, "txt", pagetype.RECALL) or "")
    assert balanced != recall
    assert HEADING in recall and HEADING not in balanced
    assert render("html", html, "text", URL).content == balanced
    assert HEADING not in render("html", html, "clean", URL).content
    assert render("html", _page(), "text", URL).content == recall
    assert HEADING in render("html", _page(), "clean", URL).content
