"""Which IP addresses Sift may connect to: only public ones.

`ipaddress` alone is not enough: it calls 100.64.0.1 not private, and 224.0.0.1, fec0::1,
::127.0.0.1, 2002:7f00:1:: and 64:ff9b::7f00:1 global. So every special range is named here
explicitly, IPv4 hidden inside IPv6 is dug out and judged as IPv4, and whatever `ipaddress` still
does not call global is refused as a last resort. When in doubt, an address is not public.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

IPAddress = IPv4Address | IPv6Address

_V4: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), why)
    for net, why in (
        ("0.0.0.0/32", "unspecified"),
        ("0.0.0.0/8", "this network"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared address space (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local (cloud metadata)"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay anycast (deprecated)"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "broadcast"),
        ("240.0.0.0/4", "reserved"),
    )
)

_V6: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), why)
    for net, why in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing (SRv6)"),
        ("fc00::/7", "unique-local (ULA)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    )
)

_GLOBAL_UNICAST = IPv6Network("2000::/3")
_MAPPED = IPv6Network("::ffff:0:0/96")
_COMPATIBLE = IPv6Network("::/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = IPv6Network("2002::/16")
_TEREDO = IPv6Network("2001::/32")


def parse_ip(value: str | IPAddress) -> IPAddress:
    """An address object from a string (an IPv6 zone id such as `%eth0` is dropped).

    Raises ValueError when `value` is not an IP address.
    """
    if isinstance(value, (IPv4Address, IPv6Address)):
        ip = value
    else:
        ip = ip_address(str(value).split("%", 1)[0])
    if isinstance(ip, IPv6Address) and ip.scope_id:
        ip = IPv6Address(ip.packed)
    return ip


def embedded_ipv4(ip: IPAddress) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 form carries, with the form's name; None if there is none.

    Mapped, IPv4-compatible, NAT64 (64:ff9b::/96), 6to4 and Teredo (the client address, stored
    bit-inverted in the last 32 bits). ::/128 and ::1 are not IPv4-compatible addresses.
    """
    if not isinstance(ip, IPv6Address):
        return None
    n = int(ip)
    if ip in _MAPPED:
        return "IPv4-mapped", IPv4Address(n & 0xFFFFFFFF)
    if ip in _COMPATIBLE and n > 1:
        return "IPv4-compatible", IPv4Address(n & 0xFFFFFFFF)
    if ip in _NAT64:
        return "NAT64", IPv4Address(n & 0xFFFFFFFF)
    if ip in _SIX_TO_FOUR:
        return "6to4", IPv4Address((n >> 80) & 0xFFFFFFFF)
    if ip in _TEREDO:
        return "Teredo", IPv4Address(~n & 0xFFFFFFFF)
    return None


def _why_not_public_v4(ip: IPv4Address) -> str | None:
    for net, why in _V4:
        if ip in net:
            return why
    if not ip.is_global:
        return "not globally routable"
    return None


def why_not_public(ip: str | IPAddress) -> str | None:
    """None when `ip` is a public address; otherwise a short reason ("loopback", …).

    Reasons never contain commas, so they survive being joined into one message.
    """
    try:
        ip = parse_ip(ip)
    except ValueError:
        return "not an IP address"
    if isinstance(ip, IPv4Address):
        return _why_not_public_v4(ip)
    for net, why in _V6:
        if ip in net:
            return why
    carried = embedded_ipv4(ip)
    if carried is not None:
        form, v4 = carried
        inner = _why_not_public_v4(v4)
        if inner is not None:
            return f"{form} {v4}: {inner}"
        if form == "IPv4-compatible":
            return f"{form} {v4}: deprecated form"
        if form == "Teredo":
            server = IPv4Address((int(ip) >> 64) & 0xFFFFFFFF)
            inner = _why_not_public_v4(server)
            if inner is not None:
                return f"Teredo server {server}: {inner}"
        return None
    if ip not in _GLOBAL_UNICAST:
        return "reserved"
    if not ip.is_global:
        return "not globally routable"
    return None


def is_public(ip: str | IPAddress) -> bool:
    """True when Sift may connect to `ip` without an explicit allowance."""
    return why_not_public(ip) is None
