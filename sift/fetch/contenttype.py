"""What kind of body a response carries, and how to turn its bytes into text.

The header is trusted when it names a type we know; when it is missing or generic
(`application/octet-stream` and friends) the first bytes decide, the way browsers sniff. Every
other type (images, video, audio, fonts, archives, office files…) is refused with `Unsupported`
before anything tries to parse it.
"""

from __future__ import annotations

import codecs
import re

import charset_normalizer

from sift.errors import Unsupported

_EXACT = {
    "text/html": "html",
    "application/xhtml+xml": "xhtml",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "application/json": "json",
    "text/json": "json",
    "application/xml": "xml",
    "text/xml": "xml",
    "application/rss+xml": "xml",
    "application/atom+xml": "xml",
    "application/rdf+xml": "xml",
    "application/pdf": "pdf",
    "application/x-pdf": "pdf",
    # Text in all but name: served as plain text.
    "application/javascript": "text",
    "application/x-javascript": "text",
    "application/ecmascript": "text",
    "application/x-ndjson": "text",
    "application/jsonl": "text",
    "application/x-yaml": "text",
    "application/yaml": "text",
    "application/toml": "text",
    "application/x-sh": "text",
    "application/sql": "text",
    "application/csv": "text",
    "application/x-tex": "text",
}
# Types that say nothing about the body: sniff it.
_GENERIC = {
    "",
    "application/octet-stream",
    "binary/octet-stream",
    "application/unknown",
    "application/x-unknown",
    "application/download",
    "application/force-download",
    "unknown/unknown",
    "*/*",
}
_REFUSED_PREFIXES = ("image/", "video/", "audio/", "font/", "model/", "multipart/")
# Magic numbers of binary formats we refuse outright, even without a header.
_BINARY_MAGIC = (
    b"\x89PNG",
    b"\xff\xd8\xff",
    b"GIF8",
    b"RIFF",
    b"PK\x03\x04",
    b"\x1f\x8b",
    b"BZh",
    b"7z\xbc\xaf",
    b"Rar!",
    b"\x00\x00\x01\x00",
    b"\x7fELF",
    b"OggS",
    b"ID3",
    b"fLaC",
    b"\x1aE\xdf\xa3",
    b"wOFF",
    b"wOF2",
)
_EXT_KINDS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".csv": "text",
    ".json": "json",
    ".xml": "xml",
    ".rss": "xml",
    ".atom": "xml",
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Labels browsers treat as windows-1252 (a superset that decodes 0x80-0x9f sensibly).
_AS_CP1252 = {"iso-8859-1", "iso8859-1", "latin-1", "latin1", "l1", "us-ascii", "ascii"}
_BINARY_BYTES = set(range(0x00, 0x09)) | {0x0B} | set(range(0x0E, 0x1B)) | set(range(0x1C, 0x20))
_META_CHARSET = re.compile(
    rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]{1,40})""", re.I
)
_XML_ENCODING = re.compile(
    rb"""^<\?xml[^>]{0,200}?encoding\s*=\s*["']([a-zA-Z0-9_.:-]{1,40})["']"""
)


def media_type(content_type_header: str | None) -> tuple[str, dict[str, str]]:
    """The lower-cased media type and its parameters (`charset` and the like)."""
    if not content_type_header:
        return "", {}
    head, *rest = content_type_header.split(";")
    params = {}
    for part in rest:
        key, sep, value = part.partition("=")
        if sep:
            params[key.strip().lower()] = value.strip().strip('"').strip("'")
    return head.strip().lower(), params


def classify(content_type_header: str | None, body_head: bytes, url: str = "") -> str:
    """The kind of this response (html, xhtml, text, markdown, json, xml or pdf), or
    `Unsupported` for a type Sift does not read.

    `body_head` is the first bytes of the body (a kilobyte or two is plenty).
    """
    mime, _ = media_type(content_type_header)
    if mime in _EXACT:
        return _EXACT[mime]
    if mime.startswith(_REFUSED_PREFIXES) or mime.endswith("+zip"):
        raise Unsupported(f"unsupported content type {mime}")
    if mime.endswith("+json"):
        return "json"
    if mime.endswith("+xml"):
        return "xml"
    if mime.startswith("text/"):
        return "markdown" if _url_kind(url) == "markdown" else "text"
    if mime in _GENERIC:
        kind = sniff(body_head, url, allow_text=not mime or mime in ("*/*", "unknown/unknown"))
        if kind:
            return kind
        shown = mime or "no content type"
        raise Unsupported(f"unsupported content type ({shown}, and the body is not text)")
    raise Unsupported(f"unsupported content type {mime}")


def sniff(head: bytes, url: str = "", *, allow_text: bool = True) -> str | None:
    """The kind the first bytes reveal, or None when they look like nothing we read."""
    if head.startswith(_BINARY_MAGIC):
        return None
    lead = head.lstrip(b"\xef\xbb\xbf \t\r\n\x0c")
    if lead.startswith(b"%PDF-") or b"%PDF-" in head[:1024]:
        return "pdf"
    low = lead[:1024].lower()
    if low.startswith(b"<?xml"):
        if b"<html" in low:
            return "xhtml"
        return "xml"
    if low.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or (
        low.startswith(b"<") and (b"<html" in low or b"<body" in low or b"<head" in low)
    ):
        return "html"
    if low.startswith((b"<rss", b"<feed", b"<rdf:rdf", b"<urlset", b"<sitemapindex")):
        return "xml"
    if lead[:1] in (b"{", b"["):
        return "json"
    by_ext = _url_kind(url)
    if by_ext in ("markdown", "text", "json", "xml", "html") and _looks_textual(head):
        return by_ext
    if allow_text and _looks_textual(head):
        return "markdown" if by_ext == "markdown" else "text"
    return None


def _url_kind(url: str) -> str | None:
    path = url.split("#", 1)[0].split("?", 1)[0].lower()
    dot = path.rfind(".")
    if dot < 0 or "/" in path[dot:]:
        return None
    return _EXT_KINDS.get(path[dot:])


def _looks_textual(head: bytes) -> bool:
    """No NUL and no other control bytes beyond the usual whitespace: the WHATWG binary test."""
    if not head:
        return True
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return True
    return not (set(head[:2048]) & _BINARY_BYTES)


def decode(body: bytes, content_type_header: str | None = None) -> str:
    """Text of the body; never raises (undecodable bytes become U+FFFD).

    Order: a byte-order mark (it wins, as in browsers), the header's charset, a `<meta>` or
    XML-declaration charset, strict UTF-8, then charset-normalizer's best guess.
    """
    for bom, enc in _BOMS:
        if body.startswith(bom):
            return body.decode(enc, errors="replace")
    _, params = media_type(content_type_header)
    enc = _codec(params.get("charset", ""))
    if enc is None:
        head = body[:4096]
        m = _XML_ENCODING.match(head.lstrip()) or _META_CHARSET.search(head)
        enc = _codec(m.group(1).decode("ascii")) if m else None
    if enc is not None:
        return body.decode(enc, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    best = charset_normalizer.from_bytes(body[:65536]).best()
    enc = _codec(best.encoding) if best is not None else None
    return body.decode(enc or "utf-8", errors="replace")


def _codec(label: str) -> str | None:
    label = label.strip().lower()
    if not label:
        return None
    if label in _AS_CP1252:
        return "cp1252"
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    # A declared UTF-16/32 without a BOM is usually a lie about ASCII-compatible bytes.
    if name.startswith(("utf-16", "utf-32")):
        return None
    return name
