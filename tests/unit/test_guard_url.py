"""The URL pre-check: what is refused before anything is resolved, and why."""

from __future__ import annotations

import pytest
from yarl import URL

from sift.errors import Refused
from sift.guard import MAX_URL_LENGTH, Policy, join_location, parse_ipv4_number, precheck

DEFAULT = Policy()


def refusal(url: str, policy: Policy = DEFAULT) -> str:
    with pytest.raises(Refused) as info:
        precheck(url, policy)
    assert info.value.status == 422
    return info.value.msg


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://example.com/a?b=c#d",
        "HTTPS://Example.COM:443/x",
        "http://example.com:80/",
        "http://exämple.com/",
        "http://sub_domain.example.com/",
        "http://example.com./",
        "http://8.8.8.8/",
        "http://[2606:4700:4700::1111]/",
    ],
)
def test_ordinary_public_urls_pass(url):
    assert isinstance(precheck(url, DEFAULT), URL)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://example.com/", "scheme 'ftp' is not allowed"),
        ("file:///etc/passwd", "scheme 'file' is not allowed"),
        ("gopher://example.com:70/", "scheme 'gopher'"),
        ("javascript:alert(1)", "scheme 'javascript'"),
        ("example.com/page", "must be absolute"),
        ("//example.com/page", "must be absolute"),
    ],
)
def test_only_absolute_http_and_https_urls_pass(url, words):
    assert words in refusal(url)


@pytest.mark.parametrize(
    ("url", "port"),
    [("http://example.com:22/", 22), ("https://example.com:8443/", 8443), ("http://a.com:0/", 0)],
)
def test_ports_outside_allowed_ports_are_refused(url, port):
    assert f"port {port} is not allowed" in refusal(url)


def test_default_port_counts_against_allowed_ports():
    assert "port 443 is not allowed" in refusal("https://example.com/", Policy.of((80,)))
    assert precheck("http://example.com/", Policy.of((80,))).port == 80


@pytest.mark.parametrize(
    "url", ["http://user@example.com/", "http://user:pw@example.com/", "http://:pw@example.com/"]
)
def test_userinfo_is_refused(url):
    assert "credentials" in refusal(url)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://exa%6dple.com/", "percent-encoding"),
        ("http://127.0.0.1%2f/", "percent-encoding"),
        ("http://exa\\mple.com/", "backslash"),
        ("http://a..com/", "not a valid host name"),
        ("http://-a.com/", "not a valid host name"),
        ("http://exa mple.com/", "not a valid host name"),
        ("http:///path", "no host"),
        ("http://xn--zz.com/", "internationalized"),
        ("http://\ufffd.com/", "internationalized"),
        ("http://example.com/\x00", "control characters"),
        ("http://[::g]/", "not a valid IPv6 address"),
        ("http://example.com:99999/", "not a valid URL"),
    ],
)
def test_bad_hosts_are_refused(url, words):
    assert words in refusal(url)


def test_overlong_urls_are_refused():
    url = "http://example.com/" + "a" * MAX_URL_LENGTH
    assert "longer than" in refusal(url)


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://10.0.0.1/", "10.0.0.1"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("http://100.64.0.1/", "100.64.0.1"),
        ("http://0.0.0.0/", "0.0.0.0"),
        ("http://[::1]/", "::1"),
        ("http://[::ffff:127.0.0.2]/", "::ffff:7f00:2"),
        ("http://[::ffff:169.254.169.254]/", "::ffff:a9fe:a9fe"),
        ("http://[fe80::1%25eth0]/", None),
        ("http://[fd00::1]/", "fd00::1"),
        ("http://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1"),
    ],
)
def test_literal_ips_that_are_not_public_are_refused(url, address):
    msg = refusal(url)
    if address is None:
        assert "percent-encoding" in msg  # a zone id is %25-encoded in a URL host
    else:
        assert f"address {address} is not public" in msg


@pytest.mark.parametrize(
    ("spelling", "means"),
    [
        ("2130706433", "127.0.0.1"),  # one decimal number
        ("0x7f000001", "127.0.0.1"),  # one hex number
        ("017700000001", "127.0.0.1"),  # one octal number
        ("0x7f.1", "127.0.0.1"),  # hex, short form
        ("0177.0.0.1", "127.0.0.1"),  # octal first part
        ("0x7F.0x00.0x00.0x01", "127.0.0.1"),
        ("127.1", "127.0.0.1"),  # short form
        ("127.0.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("0", "0.0.0.0"),
        ("127.0.0.1.", "127.0.0.1"),  # trailing dot
        ("１２７.０.０.１", "127.0.0.1"),  # full-width digits
        ("127。0。0。1", "127.0.0.1"),  # ideographic full stops
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("2852039166", "169.254.169.254"),
    ],
)
def test_every_ipv4_spelling_is_judged_as_the_address_it_means(spelling, means):
    assert f"address {means} is not public" in refusal(f"http://{spelling}/")


@pytest.mark.parametrize(
    "host", ["1.2.3.999", "256.1.1.1", "1.2.3.4.5", "0x1g.1", "a.1", "09.1.1.1", "1.2.99999999"]
)
def test_hosts_ending_in_a_number_must_be_valid_addresses(host):
    assert parse_ipv4_number(host) is False
    assert "looks like an IP address" in refusal(f"http://{host}/")


def test_public_address_in_a_legacy_spelling_is_fetched_as_the_canonical_literal():
    url = precheck("http://134744072:80/path?q=1", DEFAULT)
    assert str(url) == "http://8.8.8.8/path?q=1"
    assert precheck("http://0x8.0x8.0x8.0x8/", DEFAULT).raw_host == "8.8.8.8"


def test_allow_networks_let_a_loopback_literal_through():
    policy = Policy.of((80, 8080), ["127.0.0.1/32"])
    assert precheck("http://127.0.0.1:8080/", policy).port == 8080
    assert precheck("http://2130706433:8080/", policy).raw_host == "127.0.0.1"
    assert "not public (loopback)" in refusal("http://127.0.0.2:8080/", policy)
    assert "not public" in refusal("http://[::1]:8080/", policy)


def test_names_are_left_to_the_connect_layer():
    # A name is only judged once resolved; the pre-check must not resolve anything.
    assert precheck("http://localhost/", DEFAULT).raw_host == "localhost"


BASE = URL("http://example.com/dir/page")


@pytest.mark.parametrize(
    "location",
    [
        "\\\\127.0.0.1/",
        "/\\127.0.0.1/",
        "\\/127.0.0.1/",
        "http:\\\\127.0.0.1/",
        "https:/\\example.com/",
    ],
)
def test_backslash_redirect_locations_are_refused_when_joined(location):
    with pytest.raises(Refused, match="backslashes"):
        join_location(BASE, location, DEFAULT)


@pytest.mark.parametrize(
    ("location", "words"),
    [
        ("//127.0.0.2:8080/", "address 127.0.0.2 is not public"),
        ("//[::1]/", "address ::1 is not public"),
        ("//169.254.169.254/latest", "address 169.254.169.254 is not public"),
        ("http://10.0.0.1/", "address 10.0.0.1 is not public"),
        ("//0x7f.1/", "address 127.0.0.1 is not public"),
        ("ftp://example.com/", "scheme 'ftp'"),
        ("//example.com:22/", "port 22"),
        ("//user@example.com/", "credentials"),
    ],
)
def test_redirect_targets_get_the_same_pre_check(location, words):
    policy = Policy.of((80, 443, 8080), [])
    with pytest.raises(Refused) as info:
        join_location(BASE, location, policy)
    assert words in info.value.msg


def test_relative_redirects_resolve_against_the_base():
    assert str(join_location(BASE, "other?x=1", DEFAULT)) == "http://example.com/dir/other?x=1"
    assert str(join_location(BASE, "/a\\b", DEFAULT)) == "http://example.com/a%5Cb"
    assert str(join_location(BASE, "https://example.org/", DEFAULT)) == "https://example.org/"
