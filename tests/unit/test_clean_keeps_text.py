"""clean never loses what text keeps (docs/EXTRACTION.md §How `clean` keeps links, images and
code): runs the ordered matching cannot place are kept when the extractor kept their words."""

from __future__ import annotations

import re

import lxml.html

from sift.fetch import mainblocks
from sift.fetch.render import render

URL = "https://news.harbour.example/markets/today"
PARA = (
    "<p>{0} The harbour authority published its quarterly figures this morning, and the "
    "numbers show a steady rise in container traffic across every terminal of the port.</p>"
)


def _words(s: str) -> list[str]:
    return re.findall(r"\w+", s.lower())


def _page(body: str, head: str = "") -> str:
    paras = "".join(PARA.format(f"Paragraph {n}.") for n in range(1, 5))
    return (
        f"<html><head><title>Markets today</title>{head}</head><body>"
        "<nav><a href='/'>Home</a> <a href='/markets'>Markets</a></nav>"
        f"<main><article><h1>Markets today</h1>{paras}{body}</article></main>"
        "<footer>Copyright the harbour paper</footer></body></html>"
    )


def _missing(html: str) -> set[str]:
    """Words of text mode that clean lacks."""
    text = render("html", html, "text", URL).content
    clean = render("html", html, "clean", URL).content
    return set(_words(text)) - set(_words(clean))


def test_clean_keeps_a_table_of_short_cells_the_extractor_kept():
    rows = "".join(
        f"<tr><td>{t}</td><td>{p}</td><td>{c}</td></tr>"
        for t, p, c in (
            ("HBRA", "104.2", "+1.3"),
            ("QUAY", "88.7", "-0.4"),
            ("DOCK", "12.9", "+0.1"),
        )
    )
    html = _page(
        f"<figure><table><tr><th>Ticker</th><th>Price</th><th>Change</th></tr>{rows}</table>"
        "<figcaption>Closing prices</figcaption></figure>"
    )
    assert "hbra" in _words(render("html", html, "text", URL).content)
    assert not _missing(html)


def test_clean_keeps_lines_split_by_line_breaks():
    html = _page(
        "<p>Harbour office<br>Telephone 925 846 7768<br>Fax 925 846 2836<br>"
        "Email office at harbour dot example</p>"
    )
    assert not _missing(html)


def test_clean_shows_content_the_page_streams_into_a_hidden_block():
    paras = "".join(PARA.format(f"Streamed {n}.") for n in range(1, 6))
    html = (
        "<html><head><title>Streamed</title></head><body><article><h1>Streamed article</h1>"
        f"{PARA.format('Visible.')}<div hidden='' id='S:1'><div>{paras}</div></div></article>"
        "</body></html>"
    )
    clean = render("html", html, "clean", URL).content
    assert "Streamed 5." in clean
    assert not _missing(html)


def test_link_text_in_brackets_is_escaped_so_the_link_stays_a_link():
    html = _page(
        "<p>Mixture models were studied before "
        "<a href='https://papers.example/2004'>[Chen-Moitra '20]</a> in depth, see the "
        "appendix of the report for the full derivation of the bounds.</p>"
    )
    clean = render("html", html, "clean", URL).content
    assert "[\\[Chen-Moitra '20\\]](https://papers.example/2004)" in clean


def test_short_lines_after_the_last_paragraph_are_kept():
    dates = "".join(f"<li>{d} – {c}</li>" for d, c in (("12 May", "Oslo"), ("14 May", "Bergen")))
    html = _page(f"<h2>Tour dates</h2><ul>{dates}</ul>")
    assert "bergen" in _words(render("html", html, "text", URL).content)
    assert not _missing(html)


def test_a_heading_wins_over_its_table_of_contents_entry():
    sections = ("Who is it for", "What can I ask for")
    toc = "".join(f"<li><a href='#s{i}'>{t}</a></li>" for i, t in enumerate(sections))
    body = "".join(f"<h3 id='s{i}'>{t}</h3><p>Part {i}.</p>" for i, t in enumerate(sections))
    tree = lxml.html.document_fromstring(f"<html><body><ul>{toc}</ul>{body}</body></html>")
    runs = mainblocks._runs(tree.find("body"))
    for run in runs:  # as the ordered matching left it on a page: the entries took the words
        run.keep = run.items[0][1].tag == "li"
    mainblocks._headings_over_contents(runs)
    kept = {run.items[0][1].tag for run in runs if run.keep}
    assert kept == {"h3"}


def test_a_long_run_the_extractor_trimmed_in_the_middle_is_kept():
    paras = "".join(PARA.format(f"Paragraph {n}.") for n in range(1, 4))
    byline = (
        "Posted by harbourmaster on Tuesday July 24, @11:25AM from the tides-wait-for-no-one dept."
    )
    tree = lxml.html.document_fromstring(f"<html><body><p>{byline}</p>{paras}</body></html>")
    # The extractor's text: the byline without its date, then the paragraphs.
    extracted = "Posted by harbourmaster from the tides-wait-for-no-one dept.\n" + "\n".join(
        p.text_content() for p in list(tree.iter("p"))[1:]
    )
    kept = mainblocks.main_tree(tree, extracted)
    assert "harbourmaster" in kept.text_content()


def test_a_number_that_starts_a_line_of_a_paragraph_stays_text_not_a_list():
    html = _page(
        "<p>The report has three parts.<br>2. Where this is necessary the council decides."
        "<br>3. A complaint goes to the ombudsman first.</p>"
    )
    clean = render("html", html, "clean", URL).content
    assert "2\\. Where this is necessary" in clean and "3\\. A complaint" in clean
