"""The SSRF guard: Sift reaches public addresses only (docs/SECURITY.md §Guard (SSRF)).

Layers, outermost first:

* `precheck(url, policy)` refuses unsafe URLs before anything is resolved (`Refused`, 422).
* `make_connector(policy)` builds the aiohttp connector whose resolver judges every answer and
  whose socket factory judges every real destination; a block raises `GuardBlocked` inside
  aiohttp, and `blocked_reason(exc)` finds it in what aiohttp raises (map it to `Blocked`, 403).
"""

from sift.guard.addresses import embedded_ipv4, is_public, parse_ip, why_not_public
from sift.guard.blocked import GuardBlocked, blocked_reason
from sift.guard.connect import make_connector, make_socket_factory
from sift.guard.policy import Policy
from sift.guard.resolver import GuardedResolver
from sift.guard.url import MAX_URL_LENGTH, join_location, parse_ipv4_number, precheck

__all__ = [
    "MAX_URL_LENGTH",
    "GuardBlocked",
    "GuardedResolver",
    "Policy",
    "blocked_reason",
    "embedded_ipv4",
    "is_public",
    "join_location",
    "make_connector",
    "make_socket_factory",
    "parse_ip",
    "parse_ipv4_number",
    "precheck",
    "why_not_public",
]
