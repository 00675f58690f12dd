"""The URL pre-check: refuse what is unsafe before anything is resolved.

URLs are parsed with yarl, the parser aiohttp itself uses, so the host judged here is the host
aiohttp connects to. aiohttp never calls a resolver for a literal IP, so literals are judged here
(and again by the socket factory at connect time). Legacy IPv4 spellings (`2130706433`,
`0x7f.1`, `0177.0.0.1`, `127.1`) are read the way `inet_aton` reads them and judged as the
address they mean; the returned URL carries the canonical dotted quad instead.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Address, ip_address

from yarl import URL

from sift.errors import Refused
from sift.guard.policy import NETWORKS_KEY, PORTS_KEY, Policy

MAX_URL_LENGTH = 8192
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMBERISH = re.compile(r"^(?:[0-9]+|0[xX][0-9a-fA-F]*)$")
_SCHEME_PREFIX = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _ipv4_part(part: str) -> int | None:
    if part[:2] in ("0x", "0X"):
        digits = part[2:]
        return int(digits, 16) if digits else 0
    if len(part) > 1 and part[0] == "0":
        return int(part, 8) if all(c in "01234567" for c in part) else None
    return int(part)


def parse_ipv4_number(host: str) -> IPv4Address | bool | None:
    """What a host means as an IPv4 number, the way `inet_aton` (and WHATWG) read it.

    One to four parts, each decimal, octal (leading 0) or hex (0x); the last part fills the
    remaining bytes. Returns the address; None when the host is a name; False when it ends in a
    number but is not a valid address (e.g. `1.2.3.999`, `a.1`).
    """
    parts = host.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if not parts or not _NUMBERISH.match(parts[-1]):
        return None
    if len(parts) > 4 or not all(_NUMBERISH.match(p) and len(p) <= 40 for p in parts):
        return False
    values = [_ipv4_part(p) for p in parts]
    if any(v is None for v in values):
        return False
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return False
    number = last
    for i, v in enumerate(head):
        number += v << (8 * (3 - i))
    return IPv4Address(number)


def _refuse_address(ip, policy: Policy) -> None:
    reason = policy.refusal(ip)
    if reason is not None:
        raise Refused(f"address {ip} is not public ({reason}); {NETWORKS_KEY}")


def _check_name(host: str) -> None:
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253 or not all(_LABEL.match(label) for label in name.split(".")):
        raise Refused(f"host {host[:100]!r} is not a valid host name")


def precheck(url: str, policy: Policy) -> URL:
    """The parsed URL if it may be fetched, else `Refused` (422) with a one-line reason.

    Fetch the returned URL object (not the original string): it is what was checked. One
    check after another in the order docs/SECURITY.md §URL pre-check lists them; kept in one
    function so that order is visible in one place.
    """
    if not isinstance(url, str):
        raise Refused("URL must be a string")
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise Refused(f"URL is longer than {MAX_URL_LENGTH} characters")
    if _CONTROL.search(url):
        raise Refused("URL contains control characters")
    try:
        parsed = URL(url)
    except UnicodeError:
        raise Refused("host is not a valid internationalized domain name") from None
    except ValueError as e:
        raise Refused(f"not a valid URL: {str(e)[:200]}") from None
    scheme = parsed.scheme.lower()
    if not scheme:
        raise Refused("URL must be absolute and start with http:// or https://")
    if scheme not in ("http", "https"):
        raise Refused(f"scheme {scheme[:20]!r} is not allowed (http and https only)")
    if parsed.raw_user is not None or parsed.raw_password is not None:
        raise Refused("credentials (user:password@) in the URL are not allowed")
    host = parsed.raw_host
    if not host:
        raise Refused("URL has no host")
    if "%" in host or "\\" in host:
        raise Refused("percent-encoding and backslashes are not allowed in the host")
    port = parsed.port
    if not policy.allows_port(port):
        allowed = ", ".join(str(p) for p in policy.allowed_ports)
        raise Refused(f"port {port} is not allowed (allowed: {allowed}); {PORTS_KEY}")
    if ":" in host:
        try:
            ip = ip_address(host)
        except ValueError:
            raise Refused(f"host {host[:100]!r} is not a valid IPv6 address") from None
        _refuse_address(ip, policy)
        return parsed
    number = parse_ipv4_number(host)
    if number is False:
        raise Refused(f"host {host[:100]!r} looks like an IP address but is not a valid one")
    if number is not None:
        _refuse_address(number, policy)
        return parsed if host == str(number) else parsed.with_host(str(number))
    _check_name(host)
    try:
        parsed.host  # noqa: B018 -- decoding is what validates `xn--` labels
    except UnicodeError:
        raise Refused("host is not a valid internationalized domain name") from None
    return parsed


def join_location(base: URL, location: str, policy: Policy) -> URL:
    """A redirect's `Location` resolved against `base` and pre-checked like any URL.

    Browsers read `\\` as `/` in http(s) URLs, so `\\\\host`, `/\\host` or `http:\\\\host` name a
    host there while yarl reads a path; such ambiguous locations are refused outright.
    """
    if not isinstance(location, str) or len(location) > MAX_URL_LENGTH:
        raise Refused("redirect location is missing or too long")
    location = location.strip()
    if _CONTROL.search(location):
        raise Refused("redirect location contains control characters")
    rest = _SCHEME_PREFIX.sub("", location, count=1)
    lead = rest[: len(rest) - len(rest.lstrip("/\\"))]
    if "\\" in lead:
        raise Refused("redirect location uses backslashes where a host would be read")
    try:
        joined = base.join(URL(location))
    except ValueError as e:
        raise Refused(f"redirect location is not a valid URL: {str(e)[:200]}") from None
    return precheck(str(joined), policy)
