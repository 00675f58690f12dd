"""A PDF's text, page by page, with the caller's page selection (`"1-3,7,10-"`).

PDFium (pypdfium2) reads the text layer: it is fast, tolerant of damaged files and needs no
external program. PDFium is not thread-safe, so every use of it holds one process-wide lock.
Scanned PDFs without a text layer come back with empty pages; Sift does no OCR.
"""

from __future__ import annotations

import re
import threading
import zlib
from dataclasses import dataclass

import pypdfium2 as pdfium

from sift.errors import InvalidTarget, TooLong, Unsupported
from sift.fetch.render import links_in_text, short_title

PAGE_MARKER = "--- page {n} ---"
SPEC_MAX = 200  # characters of a pages spec
_RANGE = re.compile(r"^(\d+)(?:(-)(\d+)?)?$")
_STREAM = re.compile(rb"stream\r?\n")
INFLATE_CHUNK = 256 * 1024
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class PdfText:
    total: int  # pages in the document
    returned: str  # the pages returned, canonical: "1-3,7"
    content: str  # each page's text after a "--- page N ---" line
    title: str


def parse_pages(spec: str | None, total: int) -> list[int]:
    """The 1-based pages `spec` selects from a `total`-page document, ascending, no repeats.

    None or "" selects every page. A range running past the end is clipped to it (as "10-"
    is), but a selection with no page inside the document is an InvalidTarget naming the total.
    """
    if spec is None or not spec.strip():
        return list(range(1, total + 1))
    if len(spec) > SPEC_MAX:
        raise InvalidTarget(f"pages: a selection is at most {SPEC_MAX} characters", hint="pages")
    chosen: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        m = _RANGE.match(part)
        if not m:
            raise InvalidTarget(
                f'pages: {part!r} is not a page or range (write "3", "1-5" or "1-3,7,10-")',
                hint="pages",
            )
        first = int(m.group(1))
        last = int(m.group(3)) if m.group(3) else (total if m.group(2) else first)
        if first < 1:
            raise InvalidTarget("pages: pages are numbered from 1", hint="pages")
        if m.group(3) and last < first:
            raise InvalidTarget(f"pages: range {part!r} runs backwards", hint="pages")
        chosen.update(range(first, min(last, total) + 1))
    if not chosen:
        raise InvalidTarget(
            f"pages {spec.strip()!r}: the document has only {total} page{'s' * (total != 1)}",
            hint="pages",
        )
    return sorted(chosen)


def format_pages(pages: list[int]) -> str:
    """Canonical form of an ascending page list: [1, 2, 3, 7] -> "1-3,7"."""
    parts: list[str] = []
    i = 0
    while i < len(pages):
        j = i
        while j + 1 < len(pages) and pages[j + 1] == pages[j] + 1:
            j += 1
        parts.append(str(pages[i]) if i == j else f"{pages[i]}-{pages[j]}")
        i = j + 1
    return ",".join(parts)


def pdf_text(body: bytes, pages_spec: str | None, max_pages: int, mode: str = "clean") -> PdfText:
    """The text of the selected pages.

    Raises Unsupported for mode `raw` (a PDF is not text) and for a body PDFium cannot read,
    InvalidTarget for a bad selection, TooLong when more than `max_pages` pages are selected.
    Mode `links` returns the http(s) URLs found in the text; the other modes the text itself.
    """
    if mode == "raw":
        raise Unsupported(
            "mode raw returns text bodies only and this is a PDF: use mode text (with pages)"
        )
    with _lock:
        try:
            doc = pdfium.PdfDocument(body)
        except pdfium.PdfiumError as e:
            raise Unsupported(f"not a readable PDF ({e})") from None
        try:
            total = len(doc)
            pages = parse_pages(pages_spec, total)
            if len(pages) > max_pages:
                raise TooLong(
                    f"the selection has {len(pages)} of the document's {total} pages, more than "
                    f"the {max_pages} returned at most; choose some with pages, e.g. "
                    f'"1-{max_pages}"',
                    hint="pages",
                )
            texts = [(n, _page_text(doc, n)) for n in pages]
            title = _metadata_title(doc)
        finally:
            doc.close()
    if not title:
        title = next(
            (short_title(line) for _, t in texts for line in t.splitlines() if line.strip()), ""
        )
    content = "\n\n".join(f"{PAGE_MARKER.format(n=n)}\n{t}".rstrip() for n, t in texts)
    if mode == "links":
        content = links_in_text("\n".join(t for _, t in texts), "")
    return PdfText(total=total, returned=format_pages(pages), content=content, title=title)


def pdf_text_checked(body: bytes, stream_max: int, *args, **kwargs):
    """`pdf_text(body, *args, **kwargs)` once `check_streams(body, stream_max)` has passed."""
    check_streams(body, stream_max)
    return pdf_text(body, *args, **kwargs)


def check_streams(body: bytes, stream_max: int) -> None:
    """TooLong when one of the PDF's deflated streams inflates past `stream_max` bytes.

    A few hundred kilobytes of deflate can inflate to gigabytes, and PDFium would hold the
    result (and its parse) in memory. Every `stream` keyword is tried as the start of a zlib
    stream and inflated a chunk at a time, counting and dropping the output, so the check
    itself holds at most one chunk; streams in other encodings are left to the render child's
    memory limit.
    """
    view = memoryview(body)
    for m in _STREAM.finditer(body):
        try:
            _inflated_within(view[m.end() :], stream_max)
        except zlib.error:
            continue


def _inflated_within(data: memoryview, limit: int) -> None:
    inflater = zlib.decompressobj()
    size, pos = 0, 0
    while not inflater.eof and pos < len(data):
        out = inflater.decompress(data[pos : pos + INFLATE_CHUNK], INFLATE_CHUNK)
        pos += INFLATE_CHUNK
        size += len(out)
        while inflater.unconsumed_tail and not inflater.eof and size <= limit:
            size += len(inflater.decompress(inflater.unconsumed_tail, INFLATE_CHUNK))
        if size > limit:
            raise TooLong(
                f"a stream in this PDF inflates past {limit // (1024 * 1024)} MiB "
                "([render] pdf_stream_max): refused as a decompression bomb"
            )


def _page_text(doc: pdfium.PdfDocument, n: int) -> str:
    page = doc[n - 1]
    try:
        textpage = page.get_textpage()
        try:
            text = textpage.get_text_range()
        finally:
            textpage.close()
    except pdfium.PdfiumError:
        return ""
    finally:
        page.close()
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def _metadata_title(doc: pdfium.PdfDocument) -> str:
    try:
        return short_title(doc.get_metadata_value("Title") or "")
    except (pdfium.PdfiumError, KeyError, ValueError):
        return ""
