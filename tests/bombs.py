"""Hostile documents for the robustness tests and bench/hostile.py: small on the wire, huge or
slow once parsed. Each is built in memory, deterministically."""

from __future__ import annotations

import functools
import zlib

import orjson


@functools.cache
def pdf_bomb(decoded_mib: int = 100) -> bytes:
    """A one-page PDF whose content stream (text-showing operators) inflates to `decoded_mib`."""
    op = b"BT /F1 12 Tf 72 720 Td (aaaaaaaa) Tj ET\n"
    content = zlib.compress(op * (decoded_mib * 1024 * 1024 // len(op)), 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content)
        + content
        + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


@functools.cache
def html_bomb(mib: float = 2.3) -> bytes:
    """A page of nothing but tiny paragraphs: cheap to send, costly to parse and extract."""
    unit = b"<p>a</p>"
    return b"<html><body>" + unit * int(mib * 1024 * 1024 / len(unit)) + b"</body></html>"


@functools.cache
def deep_json(depth: int = 5000) -> bytes:
    """A JSON document nested deeper than Python's and orjson's recursion limits."""
    return b"[" * depth + b"]" * depth


@functools.cache
def grep_haystack(mib: float = 9.5) -> bytes:
    """A long plain-text page of one-character lines, for a heavy grep."""
    return b"ab\n" * int(mib * 1024 * 1024 / 3)


HEAVY_GREP = "(a|b|ab|ba){1,50}$"


def json_of(value) -> bytes:
    return orjson.dumps(value)


@functools.cache
def table_spans(rows: int = 300) -> bytes:
    """A 13.8 KB table whose cells each span 65,534 rows and 1,000 columns: small on the wire,
    quadratic in trafilatura's table handling (a minute of CPU in-process)."""
    row = b"<tr><td rowspan=65534 colspan=1000>a</td></tr>"
    return b"<html><body><table>" + row * rows


@functools.cache
def robots_wildcards(kib: int = 500) -> str:
    """A robots.txt of `kib` KiB of wildcard rules for every agent: tens of MiB once parsed."""
    lines = ["User-agent: *"]
    size, n = 14, 0
    while True:
        line = f"Disallow: /*x{n}*y*z*{n % 97}*$" if n % 2 else f"Allow: /p{n}/*q*r*s*{n}"
        if size + len(line) + 1 > kib * 1024:
            break
        lines.append(line)
        size += len(line) + 1
        n += 1
    return "\n".join(lines) + "\n"


def canonical_page(n: int = 0, href_bytes: int = 2 * 1024 * 1024) -> str:
    """An ordinary article whose `<link rel=canonical>` is `href_bytes` long."""
    href = "https://example.org/" + "c" * href_bytes
    return f"<html><head><link rel=canonical href='{href}'><title>p{n}</title></head><body>" + (
        f"<article><p>{'Breakwater words and more words. ' * 40}</p></article></body></html>"
    )


# A page's terminal controls: written raw to a terminal, each acts on it.
TERMINAL_CONTROLS = (
    "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # OSC 52: write the clipboard
    "\x1b]0;owned\x07"  # OSC 0: the window title
    "\x1b[2J\x1b[H"  # clear the screen
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # OSC 8: a hidden link
    "\x9b31m\x90q\x9c\x7f\r"  # C1 CSI and DCS, DEL, a carriage return
)
