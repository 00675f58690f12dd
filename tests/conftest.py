"""Shared fixtures, and the connect tripwire: no test may open a socket outside loopback.

The audit hook sees the real destination of every `socket.connect` in this process (aiohttp's
included), so a guard bug fails the test instead of sending traffic anywhere.
"""

from __future__ import annotations

import ipaddress
import socket
import sys

import pytest


class TripwireError(AssertionError):
    pass


def _is_loopback(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _tripwire(event: str, args: tuple) -> None:
    if event not in ("socket.connect", "socket.sendto"):
        return
    sock, address = args[0], args[-1]
    if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
        return
    if isinstance(address, tuple) and address and not _is_loopback(str(address[0])):
        raise TripwireError(f"tripwire: a test tried to reach {address[0]!r} (loopback only)")


sys.addaudithook(_tripwire)


@pytest.fixture
def state_dir(tmp_path):
    """A fresh state dir; short enough for a Unix socket path."""
    d = tmp_path / "s"
    d.mkdir()
    return d


# -- the Postgres tier (tests/pg.py) ------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server():
    """One throwaway PostgreSQL server for the whole run; the tier is skipped, with the reason,
    when none can be started here."""
    from tests.pg import SKIP_PREFIX, PgServer, unavailable

    reason = unavailable()
    if reason is not None:
        pytest.skip(SKIP_PREFIX + reason)
    try:
        server = PgServer().start()
    except RuntimeError as e:
        pytest.skip(f"{SKIP_PREFIX}{e}")
    yield server
    server.close()


@pytest.fixture
def pg_dsn(pg_server) -> str:
    """The DSN of a new empty database on the throwaway server."""
    return pg_server.fresh_database()
