"""Markdown output runs nothing and reads nothing (docs/SECURITY.md §Markdown output): link and
image targets with `javascript:`, `vbscript:`, `data:` or `file:` schemes are dropped, whatever
case, whitespace or entities hide them, in pages and feeds; page text that would read as markup
(`[x](javascript:…)`, `&lt;script&gt;`) stays text; code keeps its text exactly.

Bound held: no unsafe target and no unescaped tag or link made of page text in the Markdown
of `clean` and `markdown`.
"""

from __future__ import annotations

import re

import pytest

from sift.fetch import render

URL = "https://example.org/news/a"
TARGETS = [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "jav&#x09;ascript:alert(1)",
    "java&#10;script:alert(1)",
    "&#106;avascript:alert(1)",
    "&#x6A;&#x61;vascript:alert(1)",
    "vbscript:msgbox(1)",
    "VBScript:msgbox(1)",
    "data:text/html,<script>alert(1)</script>",
    "DATA:text/html;base64,PHNjcmlwdD4=",
    "file:///etc/passwd",
    "FILE://localhost/etc/passwd",
]
WORDS = "The harbour authority confirmed the breakwater will be rebuilt over three summers. " * 6
UNSAFE = re.compile(r"(?<!\\)\]\(\s*(?:javascript|vbscript|data|file):", re.I)


def page(body: str) -> str:
    return (
        f"<html><head><title>t</title></head><body><article><h1>Harbour</h1><p>{WORDS}</p>"
        f"{body}<p>{WORDS}</p></article></body></html>"
    )


@pytest.mark.parametrize("mode", ["clean", "markdown"])
@pytest.mark.parametrize("target", TARGETS)
def test_an_unsafe_link_or_image_target_is_dropped(mode, target):
    html = page(
        f"<p>{WORDS} <a href='{target}'>click here</a> and "
        f"<img src='{target}' alt='pic'> {WORDS}</p><p>{WORDS}<iframe src='{target}'></iframe>"
        f"<video src='{target}'></video><audio src='{target}'></audio></p>"
        f"<dl><dt>term</dt><dd>{WORDS}<a href='{target}'>in a list</a></dd></dl>"
    )
    md = render.render("html", html, mode, URL).content
    assert "click here" in md  # the link's text stays
    assert not UNSAFE.search(md), md
    for scheme in ("javascript", "vbscript", "file://", "data:text"):
        assert scheme not in md.lower().replace(" ", ""), md


@pytest.mark.parametrize("mode", ["clean", "markdown"])
def test_page_text_that_would_read_as_markup_stays_text(mode):
    html = page(
        f"<p>{WORDS} see [x](javascript:alert(1)) and ![i](javascript:alert(2)) "
        f"then &lt;script&gt;alert(3)&lt;/script&gt; or &lt;img src=x onerror=alert(4)&gt; "
        f"while 5 &lt; 6 holds.</p><pre><code>if a &lt;b&gt; [x](y) then</code></pre>"
        f"<dl><dt>[t](javascript:1)</dt><dd>&lt;script&gt; in a definition</dd></dl>"
    )
    md = render.render("html", html, mode, URL).content
    assert not re.search(r"(?<!\\)\]\(javascript:", md), md
    assert not re.search(r"(?<!\\)<(?:script|img)", md.split("```")[0] + md.split("```")[-1]), md
    assert "\ufdd0" not in md and "\ufdd1" not in md
    assert "5 < 6" in md  # a lone comparison is left alone
    assert "if a <b> [x](y) then" in md  # code keeps its text exactly


def test_feed_links_with_unsafe_targets_are_dropped_and_feed_text_stays_text():
    items = "".join(
        f"<item><title>Item {i} [x](javascript:1)</title><link>{t}</link>"
        "<description>&lt;p&gt;text&lt;/p&gt; &amp;lt;script&amp;gt;</description></item>"
        for i, t in enumerate(TARGETS)
    )
    feed = f"<?xml version='1.0'?><rss><channel><title>News</title>{items}</channel></rss>"
    for mode in ("clean", "markdown", "links"):
        out = render.render("xml", feed, mode, URL).content
        for scheme in ("javascript:alert", "vbscript", "file://", "data:text"):
            assert scheme not in out.lower().replace(" ", ""), (mode, out)
        if mode != "links":  # Markdown; `links` is plain lines of URL and title
            assert not UNSAFE.search(out), out
            assert not re.search(r"(?<!\\)<script", out), out
