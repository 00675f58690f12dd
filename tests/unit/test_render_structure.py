"""clean keeps what an agent acts on (docs/EXTRACTION.md §Modes): the main content, chosen by
the extractor, in its own markup: links, images, figure captions, code with its language and
whitespace, quotes, tables, definition lists; text keeps code indentation; pages state metadata."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lxml.html
import trafilatura

from sift.fetch.render import render
from tests.site import TECH_ARTICLE_METADATA

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = ROOT / "tests" / "fixtures" / "pages"
URL = "https://blog.harbour.example/posts/wal-in-practice"


def page(name: str) -> str:
    return (PAGES / f"{name}.html").read_text(encoding="utf-8")


def clean(name: str = "tech_article", **options) -> str:
    return render("html", page(name), "clean", URL, **options).content


# The exact Markdown clean gives for tech_article.html, kept beside the page.
TECH_ARTICLE_CLEAN = (PAGES / "tech_article.clean.md").read_text(encoding="utf-8").rstrip("\n")


def test_clean_is_the_main_content_in_its_own_markup_exactly():
    assert clean() == TECH_ARTICLE_CLEAN


def test_clean_links_are_absolute_markdown_links():
    out = clean()
    assert "[SQLite WAL documentation](https://www.sqlite.org/wal.html)" in out
    assert "[full benchmark write-up](https://blog.harbour.example/posts/queue-benchmarks)" in out


def test_clean_keeps_images_with_alt_and_figure_captions():
    out = clean()
    assert (
        "![Checkpoint duration over a week](https://blog.harbour.example/img/checkpoints.png)"
        in out
    )
    assert "*Checkpoint duration over a typical week of traffic.*" in out


def test_clean_never_has_data_uris():
    html = page("tech_article").replace(
        "<p>In short:", '<p><img src="data:image/png;base64,iVBORw0KGgo=" alt="dot"> In short:'
    )
    out = render("html", html, "clean", URL).content
    assert "data:" not in out and "In short: turn it on" in out


def test_code_fences_name_the_language_from_the_code_the_pre_or_the_block_around_it():
    out = clean()
    assert "```sql\nPRAGMA journal_mode = WAL;\n\nPRAGMA synchronous = NORMAL;\n```" in out
    assert "```python\ndef open_db(path):\n    conn = connect(path)\n\n    if conn" in out
    assert '```bash\nif [ -f queue.db-wal ]; then\n    echo "WAL file present"\nfi\n```' in out


def test_clean_keeps_blockquotes_tables_and_definition_lists():
    out = clean()
    assert "\n> Readers never block writers" in out
    assert "| Setting | Commits per second | p99 latency |\n| --- | --- | --- |" in out
    assert "**Checkpoint**\n    Copying committed pages" in out
    assert "**Reader mark**\n    The point in the log" in out


def test_clean_drops_the_pages_boilerplate():
    out = clean()
    for text in ("We use cookies", "All posts", "Great post", "All rights reserved", "Privacy"):
        assert text not in out


def test_links_false_leaves_the_link_text_only():
    out = clean(links=False)
    assert "See the SQLite WAL documentation and our full benchmark write-up for" in out
    assert "](http" not in out.replace("](https://blog.harbour.example/img/", "")


def test_images_false_drops_images_but_keeps_captions():
    out = clean(images=False)
    assert "![" not in out
    assert "*Checkpoint duration over a typical week of traffic.*" in out
    assert "[SQLite WAL documentation](https://www.sqlite.org/wal.html)" in out


def test_clean_output_is_the_same_on_every_run_and_in_a_fresh_process():
    first = clean()
    assert all(clean() == first for _ in range(3))
    code = (
        "import sys; from sift.fetch.render import render; "
        "sys.stdout.write(render('html', open(sys.argv[1]).read(), 'clean', sys.argv[2]).content)"
    )
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", code, str(PAGES / "tech_article.html"), URL],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=True,
        ).stdout
        assert out == first


def test_text_mode_keeps_code_indentation_and_blank_lines():
    out = render("html", page("tech_article"), "text", URL).content
    assert "def open_db(path):\n    conn = connect(path)\n\n    if conn.journal_mode" in out
    assert 'if [ -f queue.db-wal ]; then\n    echo "WAL file present"\nfi' in out
    assert "See the SQLite WAL documentation and our full benchmark write-up" in out
    assert "](" not in out and "```" not in out


def test_markdown_mode_uses_the_same_renderer_on_the_whole_page():
    out = render("html", page("tech_article"), "markdown", URL).content
    assert "[All posts](https://blog.harbour.example/posts)" in out  # navigation stays
    assert "```python\ndef open_db(path):\n    conn = connect(path)\n\n" in out
    assert "**Checkpoint**\n    Copying committed pages" in out
    assert "Great post" in out


def test_a_heading_wins_over_a_menu_item_with_the_same_words():
    out = render("html", page("docs_page"), "clean", "https://site.example.org/docs/").content
    assert out.startswith("# Configuring retries\n\nTidepool retries a failed call")
    assert "Installing Tidepool" not in out


def test_a_paragraph_repeated_elsewhere_on_the_page_is_kept_once():
    html = page("tech_article").replace(
        '<section class="comments">',
        '<div class="teaser"><p>We moved our job queue to SQLite a year ago. See the SQLite WAL '
        "documentation and our full benchmark write-up for the background; this post covers "
        "what we learned running it under real load for twelve months.</p></div>"
        '<section class="comments">',
    )
    out = render("html", html, "clean", URL).content
    assert out.count("We moved our job queue to SQLite a year ago") == 1


def test_the_extractor_leaves_the_parsed_tree_as_it_was():
    """clean reuses the tree it gave the extractor to cut out the main content."""
    tree = lxml.html.document_fromstring(page("tech_article"))
    before = lxml.html.tostring(tree)
    trafilatura.extract(tree, output_format="txt", favor_recall=True, include_tables=True)
    assert lxml.html.tostring(tree) == before


# metadata


def test_metadata_comes_from_meta_tags_and_json_ld():
    meta = render("html", page("tech_article"), "clean", URL).metadata
    assert meta == TECH_ARTICLE_METADATA


def test_a_page_without_metadata_has_every_field_null():
    rendered = render("html", page("bare_page"), "clean", "https://tides.example/")
    assert set(rendered.metadata) == {
        "title",
        "description",
        "author",
        "published",
        "language",
        "site_name",
        "canonical_url",
    }
    assert all(v is None for v in rendered.metadata.values())
    assert "tide tables for the coming month" in rendered.content


def test_metadata_is_the_same_in_every_html_mode():
    metas = [render("html", page("tech_article"), m, URL).metadata for m in ("clean", "text")]
    metas += [render("html", page("tech_article"), m, URL).metadata for m in ("raw", "links")]
    assert all(m == metas[0] for m in metas)


def test_converter_options_built_once_give_what_the_public_convert_gives():
    """docs/EXTRACTION.md §Measured on the development set (fourth pass): the compiled options
    are built once and only `base_url` is added per call; the Markdown must not change."""
    from dataclasses import replace

    import html_to_markdown

    from sift.fetch import htmlmd

    html = (
        '<h2>T</h2><p>See <a href="../a?b=1#c">this</a> and <img src="i.png" alt="x"></p>'
        "<ul><li>one</li><li>two</li></ul><table><tr><th>h</th></tr><tr><td>c</td></tr></table>"
    )
    assert htmlmd._NATIVE[id(htmlmd._OPTIONS)] is not None
    for options in (htmlmd._OPTIONS, htmlmd._INLINE):
        for base in (None, "https://example.org/x/y/"):
            public = html_to_markdown.convert(html, replace(options, base_url=base)).content
            assert htmlmd._convert(html, options, base) == public
