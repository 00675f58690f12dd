"""Render modes on realistic pages: clean keeps the article and its structure and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import lxml.html
import pytest

from sift.errors import InvalidTarget
from sift.fetch import render as render_module
from sift.fetch.render import render, tidy

PAGES = Path(__file__).parent.parent / "fixtures" / "pages"


def page(name: str) -> str:
    return (PAGES / f"{name}.html").read_text(encoding="utf-8")


def clean(name: str, url: str = "https://site.example.org/section/story") -> str:
    return render("html", page(name), "clean", url).content


# clean mode: news


def test_clean_news_keeps_article_text():
    out = clean("news_article")
    assert "Residents of Saltmarsh Quay voted on Thursday" in out
    assert "press the council to publish the full engineering report" in out


@pytest.mark.parametrize(
    "boilerplate",
    [
        "We use cookies",  # cookie banner
        "Accept all",
        "Subscribe for 1 dollar a week",  # navigation
        "Share on Facebook",  # share bar
        "Copy link",
        "Reader comments",  # comments
        "best-built thing in the county",
        "Typical priorities from the council",
        "Sea wall repairs delayed",  # related links
        "Regatta results",
        "All rights reserved",  # footer
        "Registered office",
    ],
)
def test_clean_news_drops_boilerplate(boilerplate):
    assert boilerplate not in clean("news_article")


def test_clean_news_keeps_headings_and_lists_as_markdown():
    out = clean("news_article")
    assert "# Harbour town votes to rebuild its tidal mill" in out
    assert "## How the mill will work" in out
    assert "- Autumn 2026: stonework repairs and a new roof" in out


# clean mode: docs


def test_clean_docs_keeps_code_blocks_fenced_with_their_language():
    out = clean("docs_page")
    assert "```python\nfrom tidepool import Client, RetryPolicy\n\npolicy = " in out
    assert 'client.get("/orders", params={"status": "open"})\n```' in out
    assert "```toml\n[retry]\nattempts = 4" in out


def test_clean_docs_keeps_tables_as_markdown():
    out = clean("docs_page")
    assert "| Option | Default | Meaning |" in out
    assert "| attempts | 3 | Total number of tries, the first one included |" in out


def test_clean_docs_drops_sidebar_and_footer():
    out = clean("docs_page")
    for text in ("Installing Tidepool", "Structured logging", "View page source", "Changelog"):
        assert text not in out


def test_clean_docs_keeps_inline_code():
    assert "`503 Service Unavailable`" in clean("docs_page")


# clean mode: blog and forum


def test_clean_blog_keeps_ordered_and_bullet_lists():
    out = clean("blog_post")
    assert "1. **Temperature matters more than time.**" in out
    assert "7. **Let it cool.**" in out
    assert "- A digital scale that reads single grams" in out


def test_clean_blog_drops_sidebar_share_and_announcement():
    out = clean("blog_post")
    for text in ("Free shipping", "Share this", "Sign me up", "Popular posts", "January 2026"):
        assert text not in out


def test_clean_forum_keeps_every_post_and_drops_chrome():
    out = clean("forum_thread")
    assert "loses its prime within a day" in out
    assert "pressurise the suction line with a bicycle pump" in out
    assert "split along the thread" in out
    for text in ("Similar threads", "Log in to reply", "Forum rules", "Members"):
        assert text not in out


def test_clean_output_has_no_indented_lines_that_would_read_as_code():
    for name in ("news_article", "docs_page", "blog_post", "forum_thread"):
        out = clean(name)
        fenced = False
        for line in out.split("\n"):
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced:
                assert not line.startswith("    "), (name, line)


def test_clean_falls_back_to_markdown_of_the_body_when_extractor_finds_nothing():
    html = "<html><body><nav><a href='/'>Home</a></nav><h2>Tiny</h2></body></html>"
    out = render("html", html, "clean", "https://e.org/").content
    assert "Tiny" in out
    assert "Home" not in out


# title


def test_title_comes_from_title_element():
    assert render("html", page("docs_page"), "clean", "").title == (
        "Configuring retries — Tidepool 3.2 documentation"
    )


def test_title_falls_back_to_og_title_then_h1():
    og = '<html><head><meta property="og:title" content="From OG"></head><body><h1>H</h1></body>'
    assert render("html", og, "raw", "").title == "From OG"
    h1 = "<html><body><h1>First <em>heading</em></h1><p>x</p></body></html>"
    assert render("html", h1, "raw", "").title == "First heading"


# other modes


def test_markdown_mode_is_whole_page_without_scripts_or_styles():
    out = render("html", page("news_article"), "markdown", "https://n.example.com/a/b").content
    assert "Residents of Saltmarsh Quay" in out
    assert "Related stories" in out  # the whole page, boilerplate included
    assert "dataLayer" not in out
    assert ".cookie-banner" not in out
    assert "[News](https://n.example.com/news/)" in out  # links made absolute


def test_markdown_mode_keeps_code_language():
    out = render("html", page("docs_page"), "markdown", "https://d.example.org/").content
    assert "```python\nfrom tidepool import Client, RetryPolicy\n\npolicy" in out
    assert "```toml\n[retry]" in out


def test_text_mode_is_main_content_without_markup():
    out = render("html", page("blog_post"), "text", "").content
    assert "Temperature matters more than time." in out
    assert "**" not in out
    assert "##" not in out
    assert "Popular posts" not in out


def test_raw_mode_returns_the_body_as_received():
    html = page("blog_post")
    assert render("html", html, "raw", "").content == html
    assert render("json", '{"a":1}', "raw", "").content == '{"a":1}'


def test_unknown_mode_is_invalid_target():
    with pytest.raises(InvalidTarget) as e:
        render("html", "<p>x</p>", "summary", "")
    assert e.value.status == 400
    assert "summary" in e.value.msg


def test_script_only_page_needs_a_browser():
    shell = (
        "<html><head><title>App</title><script src='/app.js'></script></head><body>"
        "<noscript>You need to enable JavaScript to run this app.</noscript>"
        "<div id='root'></div></body></html>"
    )
    # docs/EXTRACTION.md §Verdicts: the render says so; the pipeline fails the target.
    for mode in ("clean", "markdown", "text"):
        assert render("html", shell, mode, "https://app.example.org/").verdict == "bot_wall"


def test_json_ld_in_the_head_still_reaches_the_extractor_after_head_code_is_dropped():
    # docs/EXTRACTION.md §Libraries, and why: the head's scripts and styles are dropped before
    # extraction, its JSON ones kept (trafilatura's fallback reads an article body from them).
    text = "The tide mill at the river mouth ground grain for three centuries. " * 4
    ld = json.dumps({"@type": "NewsArticle", "headline": "Mill", "articleBody": text.strip()})
    html = (
        "<html><head><title>Mill</title>"
        f"<script type='application/ld+json'>{ld}</script>"
        "<script>var tide = 1;</script><style>p { color: red }</style></head>"
        "<body><div id='root'><a href='/'>Home</a></div></body></html>"
    )
    for mode in ("clean", "text"):
        out = render("html", html, mode, "https://x.example/").content
        assert "ground grain for three centuries" in out
        assert "var tide" not in out and "color" not in out


def test_the_bodys_code_and_form_controls_are_dropped_before_the_extraction_json_ld_kept():
    # docs/EXTRACTION.md §Libraries, and why: what trafilatura and the matching drop anyway
    # (scripts, styles, frames, drawings, form controls) is dropped before trafilatura copies
    # the tree; the body's JSON-LD and its templates' text stay.
    options = "".join(f"<option>Country {i}</option>" for i in range(200))
    tree = lxml.html.document_fromstring(
        "<html><body><script>var x = 1;</script><script type='application/ld+json'>{}</script>"
        f"<p>Kept words<input value='v'><button>Go</button></p><select>{options}</select>"
        "<svg><title>icon</title></svg><noscript>enable</noscript><textarea>t</textarea>"
        "<template><p>Template text</p></template></body></html>"
    )
    assert render_module._drop_code(tree) is True  # a script went: the bot-wall check counts it
    tags = {el.tag for el in tree.iter()}
    assert not tags & {"select", "option", "input", "button", "svg", "noscript", "textarea"}
    assert [el.get("type") for el in tree.iter("script")] == ["application/ld+json"]
    assert tree.find(".//template") is not None
    assert "Kept words" in tree.text_content()


def test_page_with_scripts_and_real_text_is_not_a_bot_wall():
    out = render("html", page("news_article"), "clean", "").content
    assert "tidal mill" in out


# links


def test_links_are_absolute_deduplicated_http_only():
    html = """<html><head><base href="https://cdn.example.net/docs/"></head><body>
    <a href="guide.html">Guide</a>
    <a href="guide.html#install">Guide again</a>
    <a href="/about">About</a>
    <a href="//other.example.com/x">Other</a>
    <a href="mailto:me@example.com">Mail</a>
    <a href="javascript:void(0)">JS</a>
    <a href="#top">Top</a>
    <a href="https://e.org/img"><img src="i.png" alt="Picture link"></a>
    </body></html>"""
    lines = render("html", html, "links", "https://site.example.org/a/b").content.split("\n")
    assert lines == [
        "https://cdn.example.net/docs/guide.html Guide",
        "https://cdn.example.net/about About",
        "https://other.example.com/x Other",
        "https://e.org/img Picture link",
    ]


def test_links_resolve_against_the_page_url_without_base():
    html = "<a href='../up'>Up</a><a href='next'>Next</a>"
    out = render("html", html, "links", "https://s.example.org/a/b/c").content
    assert out == "https://s.example.org/a/up Up\nhttps://s.example.org/a/b/next Next"


def test_links_of_markdown_and_text_bodies():
    md = "See [the guide](/guide) and https://example.com/raw.\n[x](mailto:a@b)"
    out = render("markdown", md, "links", "https://s.example.org/readme.md").content
    assert out.split("\n") == [
        "https://s.example.org/guide the guide",
        "https://example.com/raw",
    ]


# JSON, XML, Markdown, text


def test_json_clean_is_pretty_printed_and_markdown_is_fenced():
    body = '{"name":"tide","levels":[1,2],"note":"é"}'
    pretty = render("json", body, "clean", "").content
    assert json.loads(pretty) == json.loads(body)
    assert '\n  "levels": [\n' in pretty
    assert "é" in pretty
    fenced = render("json", body, "markdown", "").content
    assert fenced.startswith("```json\n{") and fenced.endswith("}\n```")


def test_json_text_mode_is_as_received():
    assert render("json", '{"a":1}', "text", "").content == '{"a":1}'


def test_malformed_json_is_returned_as_is():
    assert render("json", "{not json", "clean", "").content == "{not json"


RSS = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel>
<title>Harbour News</title><link>https://n.example.com/</link>
<description>Stories from the quay</description>
<item><title>Mill vote passes</title><link>https://n.example.com/mill</link>
<pubDate>Thu, 14 Mar 2026 10:00:00 GMT</pubDate>
<description>&lt;p&gt;Residents voted to &lt;b&gt;rebuild&lt;/b&gt; the mill.&lt;/p&gt;
</description></item>
<item><title>Ferry changes</title><link>/ferry</link>
<description>New timetable.</description></item>
</channel></rss>"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Dev log</title>
<entry><title>Release 3.2</title><link rel="alternate" href="https://d.example.org/3.2"/>
<updated>2026-02-01T00:00:00Z</updated><summary>Retries are configurable.</summary></entry>
</feed>"""


def test_rss_clean_lists_items_as_markdown():
    r = render("xml", RSS, "clean", "https://n.example.com/feed.xml")
    assert r.title == "Harbour News"
    assert "# Harbour News" in r.content
    assert "## [Mill vote passes](https://n.example.com/mill)" in r.content
    assert "Residents voted to rebuild the mill." in r.content
    assert "## [Ferry changes](https://n.example.com/ferry)" in r.content


def test_atom_clean_lists_entries():
    r = render("xml", ATOM, "clean", "")
    assert "## [Release 3.2](https://d.example.org/3.2)" in r.content
    assert "Retries are configurable." in r.content


def test_feed_links_mode_lists_item_links():
    out = render("xml", RSS, "links", "https://n.example.com/feed.xml").content
    assert out.split("\n") == [
        "https://n.example.com/mill Mill vote passes",
        "https://n.example.com/ferry Ferry changes",
    ]


def test_non_feed_xml_is_its_text_one_value_per_line():
    sitemap = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<url><loc>https://e.org/a</loc></url><url><loc>https://e.org/b</loc></url></urlset>"
    )
    assert render("xml", sitemap, "clean", "").content == "https://e.org/a\nhttps://e.org/b"


def test_xml_entities_are_not_expanded():
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]>'
        "<r>&c;</r>"
    )
    assert len(render("xml", bomb, "text", "").content) < 100


def test_markdown_and_text_bodies_are_returned_as_is():
    md = "# Notes\n\nSome *text*.\n"
    r = render("markdown", md, "clean", "")
    assert r.content == md
    assert r.title == "Notes"
    assert render("text", "plain\ntext", "markdown", "").content == "plain\ntext"


def test_bytes_body_is_decoded():
    r = render("html", "<html><body><h1>Café</h1></body></html>".encode(), "raw", "")
    assert r.title == "Café"


def test_pdf_is_not_rendered_here():
    with pytest.raises(ValueError):
        render("pdf", b"%PDF-1.7", "clean", "")


def test_tidy_strips_stray_indentation_and_blank_runs_but_not_code():
    md = "Title\n\n\n\n        indented text\n  - nested item\n```\n    code stays\n```\nafter"
    assert (
        tidy(md) == "Title\n\nindented text\n  - nested item\n\n```\n    code stays\n```\n\nafter"
    )
