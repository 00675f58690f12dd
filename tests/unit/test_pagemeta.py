"""Page metadata (docs/EXTRACTION.md §Page metadata): stated by the page, never guessed."""

from __future__ import annotations

import lxml.html
import pytest

from sift.fetch.pagemeta import page_metadata


def meta(
    head: str, body: str = "<p>text</p>", *, lang: str = "", url: str = "https://a.example/x/y"
):
    html = f"<html{lang}><head>{head}</head><body>{body}</body></html>"
    return page_metadata(lxml.html.document_fromstring(html), url)


def ld(obj: str) -> str:
    return f'<script type="application/ld+json">{obj}</script>'


@pytest.mark.parametrize(
    ("stated", "published"),
    [
        ("2026-03-14", "2026-03-14"),
        ("2026-03-14T09:30:00Z", "2026-03-14T09:30:00Z"),
        ("2026-03-14T09:30:00+01:00", "2026-03-14T09:30:00+01:00"),
        ("2026-03-14T09:30:00", "2026-03-14"),  # no offset: the date is all that is certain
        ("2026-03-14 09:30", "2026-03-14"),
        ("14 March 2026", None),  # not a date format the page can be trusted to mean
        ("", None),
    ],
)
def test_published_is_rfc_3339_when_the_page_states_a_date(stated, published):
    got = meta(f'<meta property="article:published_time" content="{stated}">')
    assert got["published"] == published


def test_json_ld_date_wins_over_meta_tags():
    head = '<meta name="date" content="2020-01-01">' + ld(
        '{"@type": "NewsArticle", "datePublished": "2026-02-03"}'
    )
    assert meta(head)["published"] == "2026-02-03"


def test_time_element_with_pubdate_is_a_last_resort():
    assert (
        meta("", '<time pubdate datetime="2025-12-24">Christmas Eve</time><p>x</p>')["published"]
        == "2025-12-24"
    )


def test_json_ld_graph_authors_are_joined_and_the_article_is_preferred():
    head = ld(
        '{"@context": "https://schema.org", "@graph": ['
        '{"@type": "WebSite", "name": "Site", "description": "the site"},'
        '{"@type": "Article", "headline": "Story", "description": "the story",'
        ' "author": [{"@type": "Person", "name": "Ana Reed"},'
        ' {"@type": "Person", "name": "Bo Lind"}],'
        ' "publisher": {"@type": "Organization", "name": "Daily Harbour"}, "inLanguage": "fr"}]}'
    )
    got = meta(head)
    assert got["title"] == "Story" and got["description"] == "the story"
    assert got["author"] == "Ana Reed; Bo Lind"
    assert got["site_name"] == "Daily Harbour" and got["language"] == "fr"


def test_an_author_given_as_a_url_is_not_a_name():
    head = '<meta property="article:author" content="https://social.example/ana">'
    assert meta(head)["author"] is None
    head += ld('{"@type": "Article", "author": {"name": "Ana Reed"}}')
    assert meta(head)["author"] == "Ana Reed"


def test_canonical_url_is_absolute_and_http_only():
    assert meta('<link rel="canonical" href="/x/z">')["canonical_url"] == "https://a.example/x/z"
    assert meta('<link rel="canonical" href="javascript:alert(1)">')["canonical_url"] is None
    assert (
        meta('<meta property="og:url" content="https://b.example/">')["canonical_url"]
        == "https://b.example/"
    )


def test_language_comes_from_the_html_element_then_meta_and_is_a_tag():
    assert meta("", lang=' lang="de-CH"')["language"] == "de-CH"
    assert meta('<meta property="og:locale" content="en_GB">')["language"] == "en-GB"
    assert meta("", lang=' lang="not a language!"')["language"] is None


def test_malformed_or_oversized_json_ld_is_ignored():
    head = ld("{not json") + ld('{"@type": "Article", "headline": "' + "x" * 300_000 + '"}')
    got = meta(head)
    assert got["title"] is None and got["author"] is None


def test_fields_are_whitespace_collapsed_and_capped():
    got = meta(f'<meta name="description" content="  a\n\n b {"y" * 5000}">')
    assert got["description"].startswith("a b y") and len(got["description"]) == 1000
    assert got["description"].endswith("…")
