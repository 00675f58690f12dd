"""The connect-time guard: an aiohttp connector that can only reach allowed addresses.

Two layers. The guarded resolver judges every name's answer. The socket factory is the last
line: aiohappyeyeballs calls it with the real destination of every connect (literal IPs, which
never reach a resolver, and redirect targets included) and it refuses a non-allowed one before a
socket even exists.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import aiohttp
from aiohttp.abc import AbstractResolver

from sift.guard.blocked import GuardBlocked
from sift.guard.policy import Policy
from sift.guard.resolver import GuardedResolver

AddrInfo = tuple  # (family, type, proto, canonname, sockaddr), as aiohappyeyeballs passes it

DNS_CACHE_TTL = 10.0  # seconds a checked answer is reused; cached answers were checked


def make_socket_factory(policy: Policy) -> Callable[[AddrInfo], socket.socket]:
    """A `socket_factory` for TCPConnector that refuses non-allowed destinations."""

    def socket_factory(addr_info: AddrInfo) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        if family not in (socket.AF_INET, socket.AF_INET6):
            raise GuardBlocked(f"address family {family} is not allowed")
        host, port = sockaddr[0], sockaddr[1]
        reason = policy.refusal(host)
        if reason is not None:
            raise GuardBlocked(f"address {host} is not public ({reason})")
        if not policy.allows_port(port):
            raise GuardBlocked(f"port {port} is not allowed")
        return socket.socket(family=family, type=type_, proto=proto)

    return socket_factory


def make_connector(
    policy: Policy,
    *,
    resolver: AbstractResolver | None = None,
    limit: int = 32,
    ttl_dns_cache: float | None = DNS_CACHE_TTL,
    **kwargs,
) -> aiohttp.TCPConnector:
    """A dedicated TCPConnector whose every connect is guarded by `policy`.

    `resolver` is the inner resolver the guard wraps (default: aiohttp's ThreadedResolver).
    Must be called inside a running event loop; use the connector with `trust_env=False`
    sessions (proxies from the environment would otherwise be the destination judged).
    """
    return aiohttp.TCPConnector(
        resolver=GuardedResolver(policy, resolver),
        socket_factory=make_socket_factory(policy),
        use_dns_cache=True,
        ttl_dns_cache=ttl_dns_cache,
        limit=limit,
        **kwargs,
    )
