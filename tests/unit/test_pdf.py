"""PDF page selection and text: real PDFs made with PDFium itself, read back with PDFium."""

from __future__ import annotations

import threading

import pytest

from sift.errors import InvalidTarget, TooLong, Unsupported
from sift.fetch.pdf import format_pages, parse_pages, pdf_text
from tests.pdfs import make_pdf


@pytest.fixture(scope="module")
def report() -> bytes:
    return make_pdf(
        [
            [f"Tide report part {n}", f"Page {n} says the mill wheel turned {n * 10} times."]
            for n in range(1, 13)
        ]
    )


# parse_pages


def test_single_page():
    assert parse_pages("3", 10) == [3]


def test_closed_range():
    assert parse_pages("1-5", 10) == [1, 2, 3, 4, 5]


def test_list_with_open_ended_range():
    assert parse_pages("1-3,7,10-", 12) == [1, 2, 3, 7, 10, 11, 12]


def test_overlaps_are_deduplicated_and_sorted():
    assert parse_pages("7,2-4,3,1-2", 10) == [1, 2, 3, 4, 7]


def test_spaces_are_ignored():
    assert parse_pages(" 1 - 2 , 4 ", 10) == [1, 2, 4]


def test_no_spec_selects_every_page():
    assert parse_pages(None, 3) == [1, 2, 3]
    assert parse_pages("", 3) == [1, 2, 3]


def test_range_past_the_end_is_clipped():
    assert parse_pages("8-20", 10) == [8, 9, 10]


@pytest.mark.parametrize("spec", ["0", "0-3", "5-3", "abc", "-", "-5", "1,,2", "1-2-3", "3a"])
def test_bad_spec_is_invalid_target(spec):
    with pytest.raises(InvalidTarget) as e:
        parse_pages(spec, 10)
    assert e.value.status == 400
    assert e.value.hint == "pages"


def test_pages_all_beyond_the_end_name_the_total():
    with pytest.raises(InvalidTarget) as e:
        parse_pages("40-45", 12)
    assert "12 pages" in e.value.msg


def test_overlong_spec_is_invalid_target():
    with pytest.raises(InvalidTarget):
        parse_pages(",".join(["1"] * 200), 10)


def test_format_pages_is_canonical():
    assert format_pages([1, 2, 3, 7, 10, 11]) == "1-3,7,10-11"
    assert format_pages([4]) == "4"
    assert format_pages([]) == ""


# pdf_text


def test_pdf_text_returns_selected_pages_with_markers(report):
    doc = pdf_text(report, "2-3,12", max_pages=50)
    assert doc.total == 12
    assert doc.returned == "2-3,12"
    assert doc.content.startswith("--- page 2 ---\nTide report part 2\n")
    assert "--- page 3 ---\nTide report part 3" in doc.content
    assert "Page 12 says the mill wheel turned 120 times." in doc.content
    assert "part 1\n" not in doc.content and "part 4" not in doc.content


def test_pdf_text_without_spec_returns_every_page(report):
    doc = pdf_text(report, None, max_pages=50)
    assert doc.returned == "1-12"
    assert doc.content.count("--- page ") == 12


def test_pdf_title_falls_back_to_first_line(report):
    assert pdf_text(report, "5", max_pages=50).title == "Tide report part 5"


def test_more_pages_than_max_pages_is_too_long(report):
    with pytest.raises(TooLong) as e:
        pdf_text(report, None, max_pages=10)
    assert e.value.status == 413
    assert e.value.hint == "pages"
    assert "12" in e.value.msg


def test_selection_within_max_pages_of_a_long_pdf_is_fine(report):
    assert pdf_text(report, "1-10", max_pages=10).returned == "1-10"


def test_selection_beyond_the_end_of_the_pdf_names_the_total(report):
    with pytest.raises(InvalidTarget) as e:
        pdf_text(report, "30", max_pages=50)
    assert "12 pages" in e.value.msg


@pytest.mark.parametrize("body", [b"%PDF-1.7\nthis is not really a pdf", b"", b"<html></html>"])
def test_corrupt_pdf_is_unsupported(body):
    with pytest.raises(Unsupported) as e:
        pdf_text(body, None, max_pages=50)
    assert "not a readable PDF" in e.value.msg


def test_truncated_pdf_fails_only_as_unsupported(report):
    try:
        doc = pdf_text(report[: len(report) // 3], None, max_pages=50)
    except Unsupported:
        return
    assert doc.total <= 12


def test_raw_mode_on_a_pdf_is_unsupported(report):
    with pytest.raises(Unsupported) as e:
        pdf_text(report, None, max_pages=50, mode="raw")
    assert "mode text" in e.value.msg


def test_links_mode_on_a_pdf_lists_urls_in_its_text():
    body = make_pdf([["See https://tides.example.org/table for the table."]])
    assert pdf_text(body, None, 5, mode="links").content == "https://tides.example.org/table"


def test_pdf_text_is_safe_from_many_threads(report):
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(5):
                assert pdf_text(report, "1-3", max_pages=50).returned == "1-3"
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
