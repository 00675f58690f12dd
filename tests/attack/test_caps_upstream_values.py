"""Values from upstream that no reply can encode, and keys the database cannot hold, get a
clear answer (docs/SECURITY.md §Values taken from pages): lone surrogates in upstream JSON
become U+FFFD in every mode, with `grep` and with `question` (jq refuses such JSON itself:
400), never a 500. Real API over loopback.

Bounds held: every answer 200 with valid UTF-8 JSON; an error quoting an upstream value at
most `errors.ERROR_MAX` characters.
"""

from __future__ import annotations

import pytest

from sift.errors import ERROR_MAX
from tests.attack.caps_site import HostileSite
from tests.e2e.procs import SiftProcs, http

pytestmark = pytest.mark.e2e

SURROGATES = b'{"a": "\\ud800", "b": ["x\\udfff y", {"\\udbff": "k"}], "text": "lone \\ud834 here"}'


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    site.add("/s.json", SURROGATES, "application/json")
    site.add("/odd", b"\x00\x01binary", "application/x-" + "z" * 7000)
    yield site
    site.close()


@pytest.fixture(scope="module")
def api(hostile):
    with SiftProcs([hostile.port]) as procs:
        yield procs


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "clean"},
        {"mode": "markdown"},
        {"mode": "text"},
        {"mode": "raw"},
        {"mode": "links"},
        {"question": "what is here?"},
        {"question": "what is here?", "context": True},
        {"grep": "a"},
    ],
    ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()),
)
def test_lone_surrogates_in_upstream_json_are_replaced_not_a_500(api, hostile, options):
    status, body = http(
        "POST",
        api.base + "/v1/fetch",
        {"url": hostile.url("/s.json"), **options},
        key=api.keys["alice"],
    )
    assert status == 200, body
    assert "\ud800" not in body["content"]


def test_jq_over_lone_surrogates_is_jqs_clear_400_not_a_500(api, hostile):
    status, body = http(
        "POST",
        api.base + "/v1/fetch",
        {"url": hostile.url("/s.json"), "jq": ".a"},
        key=api.keys["alice"],
    )
    assert status == 400 and "surrogate" in body["error"], body


def test_an_error_quoting_a_content_type_of_kilobytes_is_capped(api, hostile):
    status, body = http(
        "POST", api.base + "/v1/fetch", {"url": hostile.url("/odd")}, key=api.keys["alice"]
    )
    assert status == 415, body
    assert body["error"].startswith("unsupported content type")
    assert len(body["error"]) <= ERROR_MAX
