"""Odd bytes from a caller or an upstream get a 4xx JSON answer, never a 500, and cannot forge
a log line (docs/SECURITY.md §Limits and isolation)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import threading

import pytest

from sift import log as logmod
from tests.e2e.procs import SiftProcs

pytestmark = pytest.mark.e2e

RAW_ANSWERS = {
    b"/bad-charset": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=\xff\xfe\r\n"
    b"Content-Length: 5\r\nConnection: close\r\n\r\nhello",
    b"/bad-type": b"HTTP/1.1 200 OK\r\nContent-Type: text/\xffplain\r\n"
    b"Content-Length: 5\r\nConnection: close\r\n\r\nhello",
    b"/bad-location": b"HTTP/1.1 302 Found\r\nLocation: /bad-charset?\xff\xfe\r\n"
    b"Content-Length: 0\r\nConnection: close\r\n\r\n",
    b"/deep.json": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Content-Length: 10000\r\n\r\n" + b"[" * 5000 + b"]" * 5000,
}


@pytest.fixture(scope="module")
def raw_site():
    """A loopback upstream that sends header bytes no HTTP library would write."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                path = conn.recv(65536).split(b" ")[1].split(b"?")[0]
                conn.sendall(RAW_ANSWERS.get(path, b"HTTP/1.1 404 Not Found\r\n\r\n"))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join(5)
    srv.close()


@pytest.fixture(scope="module")
def api(raw_site):
    with SiftProcs([raw_site]) as procs:
        yield procs


def raw_request(procs, head: bytes, body: bytes = b"") -> tuple[int, dict]:
    with socket.create_connection(("127.0.0.1", procs.port), timeout=30) as s:
        s.sendall(head + b"\r\n\r\n" + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data:
                header, _, rest = data.partition(b"\r\n\r\n")
                length = int(header.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                if len(rest) >= length:
                    return int(header.split(b" ")[1]), json.loads(rest[:length])
    raise AssertionError(f"no whole answer: {data!r}")


def errors_logged(procs, mark) -> list[dict]:
    return [ln for ln in procs.log_lines(since=mark) if ln.get("level") == "error"]


def test_an_authorization_header_with_non_utf8_bytes_is_401(api):
    mark = api.log_mark()
    status, body = raw_request(
        api, b"GET /v1/batch/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe"
    )
    assert status == 401 and body["success"] is False, body
    assert errors_logged(api, mark) == []


@pytest.mark.parametrize("path", ["/bad-charset", "/bad-type", "/bad-location"])
def test_upstream_header_bytes_that_are_not_utf8_are_not_a_500(api, raw_site, path):
    mark = api.log_mark()
    status, body = api.call("POST", "/v1/fetch", {"url": f"http://127.0.0.1:{raw_site}{path}"})
    assert status < 500 or status in (502, 504), body
    assert status != 500
    assert errors_logged(api, mark) == []


def test_json_nested_deeper_than_any_parser_is_served_as_received(api, raw_site):
    mark = api.log_mark()
    status, body = api.call("POST", "/v1/fetch", {"url": f"http://127.0.0.1:{raw_site}/deep.json"})
    assert status == 200, body
    assert body["content"].startswith("[[[[")
    status, body = api.call(
        "POST", "/v1/fetch", {"url": f"http://127.0.0.1:{raw_site}/deep.json", "jq": "."}
    )
    assert status == 400 and "nested too deeply" in body["error"], body
    assert errors_logged(api, mark) == []


@pytest.mark.parametrize("fmt", ["json", "kv"])
def test_a_url_cannot_forge_or_disguise_a_log_line(fmt):
    stream = io.StringIO()
    logmod.setup("info", fmt, stream)
    try:
        hostile = "http://x/\x1b[2K\nlevel=error msg=forged\r\x85\u202egnp.exe\udcff"
        logmod.fetch_event(
            logging.getLogger("sift.fetch"), "fetched", restricted=False, url=hostile
        )
    finally:
        with contextlib.suppress(Exception):
            logmod.setup("warning", "json", io.StringIO())
    out = stream.getvalue()
    assert out.count("\n") == 1 and out.endswith("\n"), out
    for bad in ("\x1b", "\r", "\x85", "\u202e", "\udcff"):
        assert bad not in out
    if fmt == "json":
        assert json.loads(out)["url"].startswith("http://x/\x1b")
