"""The address classifier and the policy: every range docs/SECURITY.md §The deny list names, judged
without a socket."""

from __future__ import annotations

import ipaddress

import pytest

from sift.config import GuardConfig
from sift.guard import Policy, embedded_ipv4, is_public, why_not_public

NOT_PUBLIC = [
    # (address, words the reason must contain)
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.0.1", "private"),
    ("192.168.255.255", "private"),
    ("169.254.169.254", "link-local"),
    ("169.254.0.1", "link-local"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("febf:ffff::1", "link-local"),
    ("100.64.0.1", "CGNAT"),
    ("100.127.255.255", "CGNAT"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    ("255.255.255.255", "broadcast"),
    ("240.0.0.1", "reserved"),
    ("254.1.2.3", "reserved"),
    ("198.18.0.1", "benchmark"),
    ("198.19.255.255", "benchmark"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("0.1.2.3", "this network"),
    ("192.0.0.8", "IETF"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("fec0::1", "site-local"),
    ("100::1", "discard"),
    ("5f00::1", "SRv6"),
    ("4000::1", "reserved"),
    ("1::1", "reserved"),
    ("2001:2::1", "not globally routable"),
]


@pytest.mark.parametrize(("address", "words"), NOT_PUBLIC)
def test_special_ranges_are_not_public(address, words):
    reason = why_not_public(address)
    assert reason is not None and words in reason
    assert not is_public(address)


HIDDEN_IPV4 = [
    # IPv4 hidden inside IPv6: (address, form, embedded address, words)
    ("::ffff:127.0.0.1", "IPv4-mapped", "127.0.0.1", "loopback"),
    ("::ffff:10.1.2.3", "IPv4-mapped", "10.1.2.3", "private"),
    ("::ffff:169.254.169.254", "IPv4-mapped", "169.254.169.254", "link-local"),
    ("::127.0.0.1", "IPv4-compatible", "127.0.0.1", "loopback"),
    ("::10.0.0.1", "IPv4-compatible", "10.0.0.1", "private"),
    ("64:ff9b::7f00:1", "NAT64", "127.0.0.1", "loopback"),
    ("64:ff9b::a9fe:a9fe", "NAT64", "169.254.169.254", "link-local"),
    ("2002:7f00:1::", "6to4", "127.0.0.1", "loopback"),
    ("2002:c0a8:101::1", "6to4", "192.168.1.1", "private"),
    # Teredo: the client address is the bit-inverted last 32 bits (~0x80fffffe = 127.0.0.1).
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo", "127.0.0.1", "loopback"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo", "10.0.0.1", "private"),
]


@pytest.mark.parametrize(("address", "form", "inner", "words"), HIDDEN_IPV4)
def test_ipv4_hidden_in_ipv6_is_judged_as_ipv4(address, form, inner, words):
    carried = embedded_ipv4(ipaddress.ip_address(address))
    assert carried == (form, ipaddress.IPv4Address(inner))
    reason = why_not_public(address)
    assert reason is not None and form in reason and words in reason


def test_plain_ipaddress_misses_what_the_classifier_catches():
    # The reason the classifier exists: each of these passes `is_global` or `not is_private`.
    missed = ["224.0.0.1", "fec0::1", "::127.0.0.1", "2002:7f00:1::", "64:ff9b::7f00:1"]
    assert all(ipaddress.ip_address(a).is_global for a in missed)
    assert not ipaddress.ip_address("100.64.0.1").is_private
    assert not ipaddress.ip_address("::ffff:127.0.0.1").is_loopback
    assert not any(is_public(a) for a in [*missed, "100.64.0.1", "::ffff:127.0.0.1"])


def test_local_use_nat64_is_refused_whatever_it_carries():
    # 64:ff9b:1::/48 may embed IPv4 at several prefix lengths: too ambiguous to read.
    assert "local-use NAT64" in why_not_public("64:ff9b:1::808:808")


def test_ipv4_compatible_form_is_refused_even_with_a_public_address():
    assert "deprecated" in why_not_public("::8.8.8.8")


def test_teredo_with_a_private_server_is_refused():
    # server 10.0.0.1 (bits 32-63), client 8.8.8.8 (inverted: f7f7:f7f7)
    assert "Teredo server 10.0.0.1" in why_not_public("2001:0:a00:1::f7f7:f7f7")


PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255",  # just below CGNAT
    "100.128.0.0",  # just above CGNAT
    "172.15.255.255",
    "172.32.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "223.255.255.255",
    "11.0.0.0",
    "2606:4700:4700::1111",
    "2a00:1450:4001::1",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo, public server and client 8.8.8.8
]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_public(address):
    assert why_not_public(address) is None
    assert is_public(address)


@pytest.mark.parametrize("junk", ["", "localhost", "1.2.3", "::g", "999.1.1.1"])
def test_what_is_not_an_address_is_not_public(junk):
    assert why_not_public(junk) == "not an IP address"


def test_policy_from_config_parses_ports_and_networks():
    policy = Policy.from_config(
        GuardConfig(allowed_ports=(80, 8080), allow_networks=("127.0.0.1/32", "fd00::/8"))
    )
    assert policy.allowed_ports == (80, 8080)
    assert policy.allow_networks == (
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("fd00::/8"),
    )
    assert policy.allows_port(8080) and not policy.allows_port(22)


def test_allow_networks_allow_exactly_their_addresses():
    policy = Policy.of(allow_networks=["127.0.0.1/32"])
    assert policy.allows_address("127.0.0.1")
    assert not policy.allows_address("127.0.0.2")
    assert not policy.allows_address("::1")
    assert policy.allows_address("8.8.8.8")
    assert not Policy().allows_address("127.0.0.1")


def test_mapped_form_of_an_allowed_address_is_allowed():
    policy = Policy.of(allow_networks=["127.0.0.1/32"])
    assert policy.allows_address("::ffff:127.0.0.1")
    assert not policy.allows_address("::ffff:127.0.0.2")


def test_ipv4_in_ipv6_needs_its_embedded_ipv4_allowed():
    # Listing the IPv6 form alone is not enough, and listing the IPv4 alone is not enough for
    # forms that go through a translator or relay.
    assert not Policy.of(allow_networks=["::/0"]).allows_address("::ffff:10.0.0.1")
    assert not Policy.of(allow_networks=["64:ff9b::/96"]).allows_address("64:ff9b::a00:1")
    assert not Policy.of(allow_networks=["10.0.0.1/32"]).allows_address("64:ff9b::a00:1")
    both = Policy.of(allow_networks=["10.0.0.1/32", "64:ff9b::/96"])
    assert both.allows_address("64:ff9b::a00:1")


def test_refusal_names_the_reason():
    assert Policy().refusal("10.0.0.1") == "private"
    assert Policy().refusal("8.8.8.8") is None
