"""Every value of the success envelope has one cap, applied in one place (docs/SECURITY.md
§Values taken from pages): a page whose every self-description is huge comes back within the
caps in every mode, pages generated with long, repeated, entity-laden or control-character
values in every field do too, and a field without a registered cap cannot reach a caller.

Bounds held: each string within its `sift.fetch.envelope.FIELDS` cap (content within
`[fetch] output_cap`); each `/v1/fetch` reply under `REPLY_MAX` bytes.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sift.fetch import envelope, render
from tests import harness
from tests.attack.caps_site import HostileSite
from tests.e2e.procs import SiftProcs, http

pytestmark = pytest.mark.e2e

OUTPUT_CAP = 20_000
REPLY_MAX = 200_000  # bytes: content (≤ 4 bytes a character) plus every capped field, with room
HUGE = 1_000_000  # characters of each hostile value
ROOT = Path(__file__).resolve().parents[2]


def huge_page() -> str:
    big = "A" * HUGE
    canonical = "https://example.org/" + "c" * (2 * HUGE)
    ld = orjson.dumps(
        {"@type": "NewsArticle", "headline": big[:150_000], "author": {"name": big[:150_000]}}
    ).decode()
    return (
        f"<html lang='{big[:1000]}'><head><title>{big}</title>"
        f"<link rel=canonical href='{canonical}'>"
        f"<meta name=description content='{big}'><meta name=author content='{big}'>"
        f"<meta property='og:site_name' content='{big}'>"
        f"<meta property='article:published_time' content='2024-01-01{big[:5000]}'>"
        f"<script type='application/ld+json'>{ld}</script></head>"
        f"<body><article><h1>{big[:200_000]}</h1>"
        + "".join(f"<p>Passage {i} {'word ' * 2000}</p>" for i in range(40))
        + f"<a href='https://example.org/{'l' * 9000}'>long link</a></article></body></html>"
    )


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    site.add("/huge", huge_page())
    site.add("/ctype", "<html><body><p>plain</p></body></html>", "text/html" + "x" * 7000)
    yield site
    site.close()


@pytest.fixture(scope="module")
def api(hostile):
    procs = SiftProcs([hostile.port], fetch={"output_cap": OUTPUT_CAP, "max_body": "12MiB"})
    # The caps are what this file checks: rendering the 6 MB page of huge values needs more
    # than the render pool's default budget (docs/SECURITY.md §The render pool's memory budget).
    harness.update_config(procs.config_path, render={"pool_memory": "1GiB"})
    with procs:
        yield procs


def within(value, cap, where: str) -> None:
    """`value` keeps `cap` (`envelope.FIELDS`), all the way down."""
    if isinstance(cap, envelope.Record):
        assert isinstance(value, dict), where
        for key, v in value.items():
            assert key in cap.fields, f"{where}.{key} has no cap"
            within(v, cap.fields[key], f"{where}.{key}")
    elif isinstance(cap, envelope.Items):
        assert isinstance(value, list) and len(value) <= cap.count, where
        for v in value:
            within(v, cap.each, where + "[]")
    elif isinstance(cap, envelope.Text):
        assert value is None or (isinstance(value, str) and len(value) <= cap.limit), (
            where,
            len(value),
        )
    elif isinstance(cap, envelope.Content):
        assert isinstance(value, str) and len(value) <= OUTPUT_CAP, where
    else:
        assert value is None or isinstance(value, (bool, int, float)), where


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "clean"},
        {"mode": "markdown"},
        {"mode": "text"},
        {"mode": "raw"},
        {"mode": "links"},
        {"mode": "clean", "question": "which passage?", "context": True},
        {"mode": "markdown", "grep": "Passage"},
    ],
    ids=lambda o: "-".join(str(v) for v in o.values()),
)
def test_every_envelope_value_of_a_page_of_huge_values_is_within_its_cap(api, hostile, options):
    url = api.base + "/v1/fetch"
    status, body = http(
        "POST", url, {"url": hostile.url("/huge"), **options}, key=api.keys["alice"], timeout=60
    )
    assert status == 200, body
    within(body, envelope.Record(envelope.FIELDS), "envelope")
    assert body["metadata"]["canonical_url"] is None  # over the URL cap: dropped, not cut
    assert len(orjson.dumps(body)) < REPLY_MAX


def test_an_upstream_content_type_of_thousands_of_characters_is_capped(api, hostile):
    status, body = http(
        "POST", api.base + "/v1/fetch", {"url": hostile.url("/ctype")}, key=api.keys["alice"]
    )
    assert status == 200, body
    assert len(body["content_type"]) <= envelope.FIELDS["content_type"].limit


def test_an_envelope_field_without_a_registered_cap_is_refused():
    with pytest.raises(envelope.UnregisteredField, match="unheard_of"):
        envelope.bounded({"success": True, "unheard_of": "x" * 10}, OUTPUT_CAP)
    with pytest.raises(envelope.UnregisteredField, match="extra"):
        envelope.bounded({"metadata": {"title": "t", "extra": "x"}}, OUTPUT_CAP)


def test_every_capped_field_is_the_documented_envelope():
    api_md = (ROOT / "docs" / "API.md").read_text("utf-8")
    table = api_md.split("### Success envelope", 1)[1].split("###", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))
    assert documented == set(envelope.FIELDS)


# -- generated pages: whatever shape a page's self-description takes, the caps hold ----------

_values = st.one_of(
    st.text(max_size=50),
    st.builds(
        lambda c, n: c * n,
        st.sampled_from(["a", "é", "&amp;", "&#x1F600;", " ", "\x01"]),
        st.integers(0, 20_000),
    ),
)
_heads = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "title",
                "meta-description",
                "meta-author",
                "og-site",
                "canonical",
                "og-url",
                "published",
                "lang",
                "ld",
            ]
        ),
        _values,
    ),
    max_size=12,
)


def _head(parts) -> str:
    out = []
    for kind, value in parts:
        v = html.escape(value, quote=True)
        out.append(
            {
                "title": f"<title>{v}</title>",
                "meta-description": f'<meta name=description content="{v}">',
                "meta-author": f'<meta name=author content="{v}">',
                "og-site": f'<meta property=og:site_name content="{v}">',
                "canonical": f'<link rel=canonical href="https://e.org/{v}">',
                "og-url": f'<meta property=og:url content="https://e.org/{v}">',
                "published": f'<meta property=article:published_time content="2024-01-01{v}">',
                "lang": f'<meta http-equiv=content-language content="{v}">',
                "ld": "<script type=application/ld+json>"
                + orjson.dumps({"@type": "Article", "headline": value, "author": {"name": value}})
                .decode()
                .replace("</", "<\\/")
                + "</script>",
            }[kind]
        )
    return "".join(out)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=_heads, mode=st.sampled_from(["clean", "markdown", "raw"]))
def test_any_generated_page_head_gives_an_envelope_within_its_caps(parts, mode):
    page = f"<html><head>{_head(parts)}</head><body><p>{'word ' * 60}</p></body></html>"
    rendered = render.render("html", page, mode, "https://e.org/p")
    env = envelope.bounded(
        {
            "success": True, "url": "https://e.org/p", "final_url": "https://e.org/p",
            "status": 200, "content_type": "text/html", "title": rendered.title,
            "metadata": rendered.metadata, "mode": mode, "content": rendered.content,
            "truncated": False, "chars": len(rendered.content), "bytes": len(page),
        },
        OUTPUT_CAP,
    )  # fmt: skip
    within(env, envelope.Record(envelope.FIELDS), "envelope")
    orjson.dumps(env)  # encodable, always
