"""Slow or idle clients cannot hold the API's connections, and no key is needed to try
(docs/SECURITY.md §Limits and isolation): a request head must arrive within
`[server] header_timeout`, a body within `[server] body_timeout`, and past
`[server] max_connections` a new connection is answered 503 at once."""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

from tests.e2e.procs import http, wait_until
from tests.robustness.helpers import configure

pytestmark = pytest.mark.e2e

CAP = 40


@pytest.fixture
def api(fresh):
    procs = fresh(start=False)
    configure(procs, server={"header_timeout": "1s", "body_timeout": "1s", "max_connections": CAP})
    procs.start()
    return procs


def partial_head(procs) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", procs.port), timeout=5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    return s


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        while data := s.recv(4096):
            if b"HTTP/1.1" in data and b"Connection: close" not in data:
                continue
        return True
    except (TimeoutError, ConnectionResetError):
        return False


def test_a_partial_request_head_is_dropped_after_the_header_timeout(api):
    socks = [partial_head(api) for _ in range(5)]
    started = time.monotonic()
    assert all(closed_by_server(s, within=10) for s in socks)
    assert time.monotonic() - started < 8
    for s in socks:
        s.close()


def test_a_body_that_never_arrives_is_408(api):
    s = socket.create_connection(("127.0.0.1", api.port), timeout=10)
    key = api.keys["alice"]
    s.sendall(
        b"POST /v1/fetch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {key}\r\nContent-Length: 100\r\n\r\n".encode()
        + b'{"url": '
    )
    head = s.recv(4096)
    s.close()
    assert head.startswith(b"HTTP/1.1 408"), head


def test_past_the_connection_cap_a_new_client_gets_503_at_once_and_healthz_recovers(api):
    mark = api.log_mark()
    socks = [partial_head(api) for _ in range(CAP + 20)]
    try:
        answers = []

        def refused() -> bool:
            answers.append(http("GET", api.base + "/healthz", timeout=5))
            return answers[-1][0] == 503

        # Connections accepted in one burst are counted once registered, a moment later.
        wait_until(refused, timeout=5, what="a 503 past the cap")
        assert answers[-1][1]["hint"] == "retry"

        def healthy() -> bool:
            with contextlib.suppress(OSError):
                return http("GET", api.base + "/healthz", timeout=5)[0] == 200
            return False

        wait_until(healthy, timeout=15, what="/healthz answers 200 again")
    finally:
        for s in socks:
            s.close()
    assert api.api.alive()
    lines = api.log_lines(since=mark)
    assert len([ln for ln in lines if ln.get("level") == "error"]) <= 1, lines[:5]


def test_closed_long_polls_free_their_slots_for_new_clients(api, site, tag):
    status, job = api.submit([site.held(f"poll-{tag}")])
    assert status == 202, job
    key = api.keys["alice"]
    head = (
        f"GET /v1/batch/{job['job_id']}?wait=60 HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {key}\r\n\r\n"
    ).encode()
    try:
        for _ in range(3):  # three waves of CAP long-polls, each closed by its client
            socks = [socket.create_connection(("127.0.0.1", api.port)) for _ in range(CAP)]
            for s in socks:
                s.sendall(head)
            for s in socks:
                s.close()
        wait_until(
            lambda: http("GET", api.base + "/healthz", timeout=5)[0] == 200,
            timeout=5,
            what="/healthz served while abandoned long-polls would still be waiting",
        )
    finally:
        site.release(f"poll-{tag}")
