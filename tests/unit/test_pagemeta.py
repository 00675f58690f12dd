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
        ("14 March 2026", "2026-03-14"),  # written out: the page states it
        ("03/04/2026", None),  # day and month cannot be told apart: not guessed
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


# Visible bylines, microdata, <time> and shown dates (docs/EXTRACTION.md §Page metadata)


def test_a_microdata_author_is_read_from_its_name():
    body = (
        "<article><h1>Tide tables</h1><div itemprop='author' itemscope>Written By: "
        "<a itemprop='url' href='/c/tom'><span itemprop='name'>Tom Reeve</span></a></div>"
        "<p>text</p></article>"
    )
    assert meta("", body)["author"] == "Tom Reeve"


def test_a_byline_under_the_heading_gives_author_and_date():
    body = (
        "<main><h1>The breakwater</h1><div class='post-meta'>September 1st, 2023 "
        "<span class='post-author'>By Emily Norwood</span></div><p>text</p></main>"
    )
    got = meta("", body)
    assert got["author"] == "Emily Norwood" and got["published"] == "2023-09-01"


def test_a_forum_posts_author_comes_from_its_data_author():
    body = (
        "<div class='thread'><h1>Fan noise</h1><article class='message' data-author='quaylord'>"
        "<div class='message-content'>It hums.</div></article></div>"
    )
    assert meta("", body)["author"] == "quaylord"


def test_a_comment_authors_name_or_date_is_not_the_pages():
    body = (
        "<article><h1>Ferries</h1><p>text</p><div class='comment'>"
        "<span class='comment-author'>Rob</span><time datetime='2024-01-02'>2 Jan</time>"
        "</div></article>"
    )
    got = meta("", body)
    assert got["author"] is None and got["published"] is None


def test_the_first_time_element_of_the_article_is_its_date_not_an_updates():
    body = (
        "<article><aside><time class='updated' datetime='2022-01-01'>x</time>"
        "<time datetime='2021-06-06'>June 6, 2021</time></aside><h2>Intro</h2></article>"
    )
    assert meta("", body)["published"] == "2021-06-06"


def test_a_json_ld_question_gives_its_author_nested_in_a_page():
    head = ld(
        '{"@type": "QAPage", "mainEntity": {"@type": "Question", "name": "q", '
        '"datePublished": "2024-09-05T23:15:57Z", "author": {"@type": "Person", "name": "DaleJ"},'
        ' "acceptedAnswer": {"@type": "Answer", "author": {"@type": "Person", "name": "Other"}}}}'
    )
    got = meta(head)
    assert got["author"] == "DaleJ" and got["published"] == "2024-09-05T23:15:57Z"


def test_an_organisation_as_json_ld_author_gives_way_to_the_visible_byline():
    head = ld('{"@type": "Article", "author": {"@type": "Organization", "name": "Law Firm"}}')
    body = "<main><h1>Claims</h1><p class='byline'>by Justin Mesh, Trial Attorney</p></main>"
    assert meta(head, body)["author"] == "Justin Mesh"
