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
        run.keep = run.atom.tag == "li"
    mainblocks._headings_over_contents(runs)
    kept = {run.atom.tag for run in runs if run.keep}
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


def test_a_numbered_table_of_contents_entry_gives_its_heading_back():
    sections = ("Who is it for", "What can I ask for")
    toc = "".join(f"<li><a href='#s{i}'>1.{i + 1} {t}</a></li>" for i, t in enumerate(sections))
    body = "".join(f"<h3 id='s{i}'>{t}</h3><p>Part {i}.</p>" for i, t in enumerate(sections))
    tree = lxml.html.document_fromstring(f"<html><body><ul>{toc}</ul>{body}</body></html>")
    runs = mainblocks._runs(tree.find("body"))
    for run in runs:  # the entries, with their section numbers, took the headings' words
        run.keep = run.atom.tag == "li"
    mainblocks._headings_over_contents(runs)
    kept = {run.atom.tag for run in runs if run.keep}
    assert kept == {"h3"}


def _cells(tree) -> list[str]:
    return [td.text_content() for td in tree.iter("td")]


def test_a_trimmed_run_claims_only_the_words_that_stand_together():
    # The heading's last words stand again at the end of the text: claimed there too, its span
    # covered the whole text and no cell between could be placed.
    rows = [("61", "Harbour Mutual Group", "2,075,205"), ("62", "Quay Farm Ins Group", "2,073,328")]
    table = "".join(f"<tr><td>{a}</td><td>{b}</td><td>{c}</td></tr>" for a, b, c in rows)
    html = (
        "<html><body><h1>Largest harbour insurers of the county ranked by premiums in 2025</h1>"
        f"<table>{table}</table><p>Premiums were ranked by premiums in 2025 and the ranking "
        "shows every insurer of the county.</p></body></html>"
    )
    tree = lxml.html.document_fromstring(html)
    extracted = (
        "Largest harbour insurers of the county ranked by premiums\n"
        + "\n".join(" | ".join(r) for r in rows)
        + "\nPremiums were ranked by premiums in 2025 and the ranking shows every insurer of the"
        " county."
    )
    kept = mainblocks.main_tree(tree, extracted)
    assert _cells(kept) == [c for r in rows for c in r]


def test_an_early_copy_of_a_later_run_does_not_take_its_place():
    # A summary box repeats a row of the specification table before the description; the
    # extractor kept the description and the table, not the box.
    paras = "".join(PARA.format(f"Paragraph {n}.") for n in range(1, 3))
    spec = "<tr><th>Weight</th><td>XS - XL: 1 lb. 13 oz.</td></tr>"
    spec += "<tr><th>Gender</th><td>Unisex</td></tr>"
    html = (
        "<html><body><div class='summary'><div>Weight</div><div>XS - XL: 1 lb. 13 oz.</div>"
        f"</div>{paras}<table>{spec}</table></body></html>"
    )
    tree = lxml.html.document_fromstring(html)
    extracted = (
        "\n".join(p.text_content() for p in tree.iter("p"))
        + "\n| Weight | XS - XL: 1 lb. 13 oz. |\n| Gender | Unisex |"
    )
    kept = mainblocks.main_tree(tree, extracted)
    assert _cells(kept) == ["XS - XL: 1 lb. 13 oz.", "Unisex"]
    assert kept.find(".//div[@class='summary']") is None
