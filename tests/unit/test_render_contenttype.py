"""Content-type classification (header first, sniffing when it says nothing) and decoding."""

from __future__ import annotations

import codecs

import pytest

from sift.errors import Unsupported
from sift.fetch.contenttype import classify, decode, media_type


@pytest.mark.parametrize(
    ("header", "kind"),
    [
        ("text/html; charset=utf-8", "html"),
        ("TEXT/HTML", "html"),
        ("application/xhtml+xml", "xhtml"),
        ("text/plain", "text"),
        ("text/csv", "text"),
        ("text/markdown; charset=UTF-8", "markdown"),
        ("application/json", "json"),
        ("application/ld+json", "json"),
        ("application/problem+json", "json"),
        ("application/rss+xml", "xml"),
        ("application/atom+xml", "xml"),
        ("text/xml", "xml"),
        ("application/pdf", "pdf"),
        ("application/javascript", "text"),
    ],
)
def test_known_header_decides_the_kind(header, kind):
    assert classify(header, b"whatever the body", "https://example.org/x") == kind


def test_plain_text_with_markdown_extension_is_markdown():
    assert classify("text/plain", b"# Title\n", "https://example.org/README.md") == "markdown"


@pytest.mark.parametrize(
    "header",
    [
        "image/png",
        "image/svg+xml",
        "video/mp4",
        "audio/mpeg",
        "font/woff2",
        "application/zip",
        "application/gzip",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/epub+zip",
    ],
)
def test_media_and_archives_are_unsupported(header):
    with pytest.raises(Unsupported) as e:
        classify(header, b"\x89PNG\r\n", "https://example.org/file")
    assert e.value.status == 415


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "pdf"),
        (b"\xef\xbb\xbf<!DOCTYPE html><html><head>", "html"),
        (b"  <html lang=en><body>hi", "html"),
        (b'<?xml version="1.0"?><rss version="2.0">', "xml"),
        (b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml">', "xhtml"),
        (b' {"a": 1}', "json"),
        (b"[1, 2, 3]", "json"),
    ],
)
def test_generic_header_is_sniffed(head, kind):
    assert classify("application/octet-stream", head, "https://example.org/download") == kind
    assert classify("", head, "https://example.org/download") == kind


def test_missing_header_with_plain_text_body_is_text():
    assert classify(None, b"just some words\nand lines\n", "https://example.org/notes") == "text"


def test_octet_stream_that_is_not_a_known_kind_is_unsupported():
    with pytest.raises(Unsupported):
        classify("application/octet-stream", b"\x00\x01\x02binary\x00", "https://example.org/x")
    with pytest.raises(Unsupported):
        classify("application/octet-stream", b"plain words", "https://example.org/blob")


def test_binary_magic_is_unsupported_even_without_header():
    for head in (b"\x89PNG\r\n\x1a\n", b"PK\x03\x04", b"\x1f\x8b\x08\x00", b"GIF89a"):
        with pytest.raises(Unsupported):
            classify(None, head, "https://example.org/x")


def test_octet_stream_with_text_extension_is_read_as_that_kind():
    assert (
        classify("application/octet-stream", b"# Notes\n", "https://e.org/a.md?x=1") == "markdown"
    )


def test_media_type_parses_parameters():
    assert media_type('text/html; Charset="ISO-8859-1"') == ("text/html", {"charset": "ISO-8859-1"})
    assert media_type(None) == ("", {})


def test_decode_uses_header_charset():
    assert decode("café".encode("cp1252"), "text/html; charset=windows-1252") == "café"


def test_decode_maps_latin1_label_to_windows_1252():
    assert decode(b"\x93quoted\x94", "text/plain; charset=iso-8859-1") == "\u201cquoted\u201d"


def test_decode_bom_wins_over_header():
    body = codecs.BOM_UTF16_LE + "héllo".encode("utf-16-le")
    assert decode(body, "text/plain; charset=iso-8859-1") == "héllo"


def test_decode_reads_meta_charset_without_header():
    body = '<html><head><meta charset="windows-1251"></head><body>Привет</body></html>'
    assert "Привет" in decode(body.encode("cp1251"), "text/html")


def test_decode_reads_xml_declaration_encoding():
    body = '<?xml version="1.0" encoding="ISO-8859-15"?><a>€uro</a>'.encode("iso-8859-15")
    assert "€uro" in decode(body, "application/xml")


def test_decode_prefers_utf8_when_nothing_declared():
    assert decode("naïve – ok".encode(), None) == "naïve – ok"


def test_decode_guesses_legacy_encoding_when_not_utf8():
    text = "Größere Übungen für Anfänger und Fortgeschrittene: Mühle, Öfen, Bäder. " * 20
    assert decode(text.encode("cp1252"), "") == text


def test_decode_never_raises_on_garbage():
    out = decode(b"\xfa\x00abc\x80\x81", "text/plain; charset=utf-8")
    assert "abc" in out
    assert decode(b"abc", "text/plain; charset=no-such-charset") == "abc"
