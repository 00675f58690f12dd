"""The connect-time guard: the guarded resolver, the socket factory, and real loopback fetches.

Non-loopback answers come from a fake inner resolver and are only ever judged, never connected
to. "Blocked at connect" is shown end to end with loopback addresses that are not allowed
(127.0.0.2, ::1), with a listener on 127.0.0.2 that must accept nothing.
"""

from __future__ import annotations

import errno
import socket

import aiohappyeyeballs
import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver

from sift.guard import (
    GuardBlocked,
    GuardedResolver,
    Policy,
    blocked_reason,
    make_connector,
    make_socket_factory,
)

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


class FakeResolver(AbstractResolver):
    """Answers from a script, one answer per call (the last one repeats); counts the calls."""

    def __init__(self, *answers: list[str]):
        self.answers = answers
        self.calls = 0
        self.closed = False

    async def resolve(self, host, port=0, family=socket.AF_INET):
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return [
            {
                "hostname": host,
                "host": a,
                "port": port,
                "family": socket.AF_INET6 if ":" in a else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for a in answer
        ]

    async def close(self):
        self.closed = True


POLICY = Policy()
TIMEOUT = aiohttp.ClientTimeout(total=5)  # a guard bug that reaches the trap fails, not hangs


async def test_all_public_answer_is_accepted_without_connecting():
    resolver = GuardedResolver(POLICY, FakeResolver([PUBLIC_V4, PUBLIC_V6]))
    answer = await resolver.resolve("example.test", 443, socket.AF_UNSPEC)
    assert [a["host"] for a in answer] == [PUBLIC_V4, PUBLIC_V6]
    assert all(a["port"] == 443 for a in answer)


@pytest.mark.parametrize(
    "private",
    ["10.0.0.1", "169.254.169.254", "100.64.0.1", "::ffff:127.0.0.1", "fd00::1", "64:ff9b::a00:1"],
)
async def test_mixed_public_and_private_answer_is_refused_whole(private):
    resolver = GuardedResolver(POLICY, FakeResolver([PUBLIC_V4, private, PUBLIC_V6]))
    with pytest.raises(GuardBlocked) as info:
        await resolver.resolve("mixed.test", 80)
    assert private in info.value.reason and "mixed.test" in info.value.reason
    assert blocked_reason(info.value) == info.value.reason


async def test_rebinding_answer_after_a_public_one_is_refused():
    inner = FakeResolver([PUBLIC_V4], ["127.0.0.1"])
    resolver = GuardedResolver(POLICY, inner)
    assert [a["host"] for a in await resolver.resolve("rebind.test", 80)] == [PUBLIC_V4]
    with pytest.raises(GuardBlocked, match=r"127\.0\.0\.1"):
        await resolver.resolve("rebind.test", 80)
    assert inner.calls == 2


async def test_empty_answer_is_a_lookup_failure_not_a_block():
    resolver = GuardedResolver(POLICY, FakeResolver([]))
    with pytest.raises(socket.gaierror) as info:
        await resolver.resolve("nothing.test", 80)
    assert blocked_reason(info.value) is None


async def test_guarded_resolver_closes_its_inner_resolver():
    inner = FakeResolver([PUBLIC_V4])
    await GuardedResolver(POLICY, inner).close()
    assert inner.closed


@pytest.mark.parametrize(
    "host",
    [
        "10.0.0.1",
        "169.254.169.254",
        "127.0.0.1",
        "::1",
        "::ffff:10.0.0.1",
        "fe80::1%lo",
        "2002:a00:1::",
    ],
)
def test_socket_factory_refuses_non_public_destinations_before_a_socket_exists(host):
    factory = make_socket_factory(POLICY)
    family, address = (
        (socket.AF_INET6, (host, 80, 0, 0)) if ":" in host else (socket.AF_INET, (host, 80))
    )
    with pytest.raises(GuardBlocked, match="is not public"):
        factory((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address))


def test_socket_factory_refuses_ports_outside_allowed_ports():
    factory = make_socket_factory(POLICY)
    with pytest.raises(GuardBlocked, match="port 22"):
        factory((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (PUBLIC_V4, 22)))


def test_socket_factory_hands_out_a_socket_for_an_allowed_destination():
    factory = make_socket_factory(Policy.of((8080,), ["127.0.0.1/32"]))
    sock = factory(
        (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 8080))
    )
    with sock:
        assert sock.family == socket.AF_INET and sock.type == socket.SOCK_STREAM


# End to end over real loopback.


@pytest.fixture
async def site(aiohttp_server):
    """A loopback web site on 127.0.0.1 that records who connected."""
    peers: list[str] = []

    async def page(request: web.Request) -> web.Response:
        peers.append(request.remote)
        return web.Response(text="hello from the site")

    async def hop(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.2:{request.url.port}/")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/hop", hop)
    server = await aiohttp_server(app, host="127.0.0.1")
    server.peers = peers
    return server


@pytest.fixture
def trap(site):
    """A listener on 127.0.0.2 at the site's port: a guard bug would connect here."""
    sock = socket.socket()
    sock.bind(("127.0.0.2", site.port))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def accepted(trap: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = trap.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def site_policy(site) -> Policy:
    return Policy.of((site.port,), ["127.0.0.1/32"])


async def fetch(connector: aiohttp.TCPConnector, url: str) -> str:
    async with (
        aiohttp.ClientSession(
            connector=connector, connector_owner=False, trust_env=False, timeout=TIMEOUT
        ) as s,
        s.get(url) as resp,
    ):
        return await resp.text()


async def test_loopback_site_is_reachable_through_allow_networks(site):
    connector = make_connector(site_policy(site))
    try:
        assert await fetch(connector, f"http://127.0.0.1:{site.port}/") == "hello from the site"
    finally:
        await connector.close()
    assert site.peers == ["127.0.0.1"]


async def test_name_resolving_to_an_allowed_address_is_reachable(site):
    connector = make_connector(site_policy(site), resolver=FakeResolver(["127.0.0.1"]))
    try:
        assert await fetch(connector, f"http://site.test:{site.port}/") == "hello from the site"
    finally:
        await connector.close()


@pytest.mark.parametrize("host", ["127.0.0.2", "[::1]", "[::ffff:127.0.0.2]"])
async def test_literal_not_allowed_is_blocked_by_the_socket_factory(site, trap, host):
    connector = make_connector(site_policy(site))
    try:
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await fetch(connector, f"http://{host}:{site.port}/")
    finally:
        await connector.close()
    # aiohttp calls no resolver for a literal, so this is the socket factory's refusal.
    assert not isinstance(info.value, aiohttp.ClientConnectorDNSError)
    reason = blocked_reason(info.value)
    assert "is not public (" in reason and "loopback" in reason
    assert accepted(trap) == 0 and site.peers == []


async def test_redirect_followed_by_aiohttp_itself_is_blocked_at_connect(site, trap):
    # The fetch code follows redirects itself with a pre-check per hop; even if aiohttp
    # followed one, the socket factory still sees and refuses the real destination.
    connector = make_connector(site_policy(site))
    try:
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await fetch(connector, f"http://127.0.0.1:{site.port}/hop")
    finally:
        await connector.close()
    assert "127.0.0.2" in blocked_reason(info.value)
    assert accepted(trap) == 0


async def test_name_resolving_to_unallowed_loopback_is_blocked_at_connect(site, trap):
    inner = FakeResolver(["127.0.0.2"])
    connector = make_connector(site_policy(site), resolver=inner)
    try:
        with pytest.raises(aiohttp.ClientConnectorDNSError) as info:
            await fetch(connector, f"http://internal.test:{site.port}/")
    finally:
        await connector.close()
    assert blocked_reason(info.value) == (
        "internal.test resolves to non-public address 127.0.0.2 (loopback)"
    )
    assert accepted(trap) == 0 and inner.calls == 1


async def test_mixed_answer_blocks_the_fetch_even_with_an_allowed_address(site, trap):
    connector = make_connector(site_policy(site), resolver=FakeResolver(["127.0.0.1", "127.0.0.2"]))
    try:
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await fetch(connector, f"http://mixed.test:{site.port}/")
    finally:
        await connector.close()
    assert "127.0.0.2" in blocked_reason(info.value)
    assert accepted(trap) == 0 and site.peers == []


async def test_connect_goes_only_to_the_checked_answer(site, trap):
    # The name answers the allowed address first, then rebinds to 127.0.0.2.
    inner = FakeResolver(["127.0.0.1"], ["127.0.0.2"])
    connector = make_connector(site_policy(site), resolver=inner, force_close=True)
    url = f"http://rebind.test:{site.port}/"
    try:
        assert await fetch(connector, url) == "hello from the site"
        assert inner.calls == 1  # one lookup, and the connection went to its checked answer
        assert site.peers == ["127.0.0.1"] and accepted(trap) == 0
        connector.clear_dns_cache()
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await fetch(connector, url)
    finally:
        await connector.close()
    assert "127.0.0.2" in blocked_reason(info.value)
    assert inner.calls == 2 and accepted(trap) == 0 and site.peers == ["127.0.0.1"]


async def test_cached_answer_is_reused_without_a_second_lookup(site):
    inner = FakeResolver(["127.0.0.1"], ["127.0.0.2"])
    connector = make_connector(site_policy(site), resolver=inner, force_close=True)
    try:
        for _ in range(3):
            assert await fetch(connector, f"http://cached.test:{site.port}/")
    finally:
        await connector.close()
    assert inner.calls == 1 and site.peers == ["127.0.0.1"] * 3


async def test_legacy_spelling_that_reaches_the_resolver_is_judged_there(site, trap):
    # aiohttp hands `0x7f.2` (not digits only) to the resolver, whose getaddrinfo reads it as
    # 127.0.0.2 without any DNS traffic; the guarded resolver judges that answer.
    connector = make_connector(site_policy(site))
    try:
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await fetch(connector, f"http://0x7f.2:{site.port}/")
    finally:
        await connector.close()
    assert "127.0.0.2" in blocked_reason(info.value)
    assert accepted(trap) == 0


async def test_connection_refused_is_not_a_block(site):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    connector = make_connector(Policy.of((port,), ["127.0.0.1/32"]))
    try:
        with pytest.raises(aiohttp.ClientConnectorError) as info:
            await fetch(connector, f"http://127.0.0.1:{port}/")
    finally:
        await connector.close()
    assert blocked_reason(info.value) is None


async def test_blocks_flattened_by_happy_eyeballs_are_still_recognised(trap):
    # Several refused addresses at once come back as one plain OSError joining the messages.
    port = trap.getsockname()[1]
    infos = [
        (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.2", port)),
        (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.3", port)),
    ]
    with pytest.raises(OSError) as info:
        await aiohappyeyeballs.start_connection(
            infos, socket_factory=make_socket_factory(Policy.of((port,)))
        )
    assert not isinstance(info.value, GuardBlocked)
    assert blocked_reason(info.value) == "address 127.0.0.2 is not public (loopback)"
    assert accepted(trap) == 0


def test_ordinary_errors_are_not_blocks():
    assert blocked_reason(None) is None
    assert blocked_reason(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) is None
    assert blocked_reason(PermissionError(errno.EACCES, "denied")) is None
    assert blocked_reason(ValueError("sift guard blocked: not an OSError")) is None


def test_block_is_found_through_causes_and_contexts():
    try:
        try:
            raise GuardBlocked("address 10.0.0.1 is not public (private)")
        except GuardBlocked as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as outer:
        assert blocked_reason(outer) == "address 10.0.0.1 is not public (private)"
