"""Generated request bodies against POST /v1/fetch and POST /v1/batch: never a 5xx, never HTML.

Bodies are arbitrary JSON values, target-shaped objects with random field names and types,
strings around every size cap, invalid UTF-8 and random bytes, some gzip- or deflate-encoded.
Every URL the server would fetch is steered to a good page of the loopback test site (a URL
the pre-check refuses stays as generated: it is refused before any lookup), so a 2xx or 4xx is
the only right answer; the canned resolver answers no name at all.
"""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sift import config
from sift.api.app import create_app
from sift.api.appkeys import PIPELINE
from sift.auth import add_key
from sift.errors import SiftError
from sift.guard import precheck
from tests.site import FakeResolver, make_site

EXAMPLES = 100
FIELDS = ("url", "mode", "question", "pages", "grep", "jq", "context", "recover")
MODES = ["clean", "markdown", "text", "raw", "links"]
GOOD_PAGES = ("/article/1", "/article/2", "/data.json", "/plain.txt", "/gz")
SIZES = (0, 1, 4095, 4096, 4097, 8191, 8192, 8193, 65535, 65536, 65537, 262143, 262145)
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=40)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=20,
)
huge_strings = st.sampled_from(SIZES).map(lambda n: "é" * (n // 2) if n % 2 else "x" * n)
urls = (
    st.text(max_size=60)
    | st.sampled_from(
        ["http://127.0.0.1/", "ftp://x/", "http://10.1.2.3/", "http://[::1]/", "https://a.b/"]
    )
    | st.builds(lambda s: f"http://127.0.0.1/{s}", st.text(max_size=30))
    | huge_strings
)
field_values = {
    "url": urls | json_values,
    "mode": st.sampled_from(["clean", "markdown", "text", "raw", "links", "pdf", ""]) | json_values,
    "context": st.booleans() | json_values,
    "recover": st.booleans() | json_values,
    **{
        name: st.text(max_size=30) | huge_strings | json_values
        for name in ("question", "pages", "grep", "jq")
    },
}
well_typed = st.fixed_dictionaries(
    {"url": urls},
    optional={
        "mode": st.sampled_from([*MODES, None]),
        "question": st.none() | st.text(max_size=40),
        "grep": st.none() | st.sampled_from(["needle", ".*", "\\d+", "(?i)HARBOUR"]),
        "context": st.none() | st.booleans(),
        "recover": st.none() | st.booleans(),
    },
)
with_jq = st.builds(
    lambda t, jq: {**{k: v for k, v in t.items() if k != "grep"}, "jq": jq},
    well_typed,
    st.sampled_from([".", ".items[].name", "repeat(1)", "[limit(5; repeat(1))]", "}{", ""]),
)
loose = st.fixed_dictionaries({}, optional={name: field_values[name] for name in FIELDS})
extra_fields = st.builds(
    lambda known, extra: {**known, **extra},
    well_typed,
    st.dictionaries(st.text(max_size=12), json_values, min_size=1, max_size=3),
)
bad_values = st.builds(
    lambda t, field, value: {**t, field: value},
    well_typed,
    st.sampled_from(["question", "pages", "grep"]),
    st.sampled_from(["1-3,7,10-", "0", "3-1", "(", "a{1000}{1000}", ""]) | huge_strings,
)
target_objects = st.one_of(
    well_typed, well_typed, well_typed, with_jq, bad_values, loose, extra_fields
)
batch_objects = st.fixed_dictionaries(
    {},
    optional={"targets": st.lists(target_objects, max_size=40) | json_values},
) | st.builds(
    lambda targets, extra: {"targets": targets, **extra},
    st.lists(target_objects, min_size=1, max_size=3),
    st.dictionaries(st.text(max_size=12), json_values, max_size=2),
)


def encode(value: Any, how: str) -> bytes:
    raw = json.dumps(value, ensure_ascii=how == "ascii").encode("utf-8", "surrogatepass")
    if how == "gzip":
        return gzip.compress(raw)
    if how == "deflate":
        return zlib.compress(raw)
    return raw


encodings = st.sampled_from(["utf-8", "ascii", "gzip", "deflate"])
content_types = st.sampled_from(
    [
        "application/json",
        "text/plain",
        "text/html",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
    ]
)
garbage = (
    st.binary(max_size=3000)
    | st.builds(
        lambda head, bad, tail: head + bad + tail,
        st.just(b'{"url": "http://127.0.0.1/'),
        st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x00"]),
        st.just(b'", "mode": "text"}'),
    )
    | st.sampled_from(
        [b'{"url": "\\ud800"}', b"{" * 10000, b"[" * 100000, b'{"targets": ' + b"[" * 5000]
    )
)


@pytest.fixture
async def env(aiohttp_server, aiohttp_client, state_dir):
    site = await aiohttp_server(make_site())
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
            "fetch": {"timeout": 2, "max_body": 1024 * 1024, "output_cap": 5000},
            "batch": {"jobs_per_caller": 100_000, "jobs_total": 100_000},
            "gates": {"requests_per_second": 0},  # fuzzing outruns the per-key request rate
        }
    )
    key = add_key(cfg.keys_file, "fuzzer")
    client = await aiohttp_client(create_app(cfg, resolver=FakeResolver({})))
    policy = client.app[PIPELINE].policy
    base = f"http://127.0.0.1:{site.port}"

    def steer(url: Any) -> Any:
        """A good site page; a URL the pre-check refuses is kept in a third of the cases."""
        if not isinstance(url, str):
            return url
        h = zlib.crc32(url.encode("utf-8", "surrogatepass"))
        try:
            precheck(url, policy)
        except SiftError:
            if h % 3 == 0:
                return url
        return base + GOOD_PAGES[h % len(GOOD_PAGES)]

    def steer_body(body: Any) -> Any:
        if isinstance(body, dict):
            if "url" in body:
                body["url"] = steer(body["url"])
            if isinstance(body.get("targets"), list):
                for t in body["targets"]:
                    if isinstance(t, dict) and "url" in t:
                        t["url"] = steer(t["url"])
        return body

    async def post(path: str, data: bytes, content_type: str = "application/json", enc=""):
        headers = {"Authorization": f"Bearer {key}", "Connection": "close"}
        if content_type:
            headers["Content-Type"] = content_type
        if enc and enc not in ("utf-8", "ascii"):
            headers["Content-Encoding"] = enc
        resp = await client.post(path, data=data, headers=headers)
        body = await resp.read()
        assert resp.status < 500, (resp.status, body[:300])
        assert resp.content_type == "application/json", (resp.status, resp.content_type, body[:300])
        answer = json.loads(body)
        assert isinstance(answer, dict) and isinstance(answer["success"], bool)
        if not answer["success"]:
            assert isinstance(answer["error"], str) and answer["error"], answer
        return resp.status, answer

    env = type("Env", (), {})()
    env.post, env.steer_body = post, steer_body
    return env


@FUZZ_SETTINGS
@given(value=json_values, how=encodings, ctype=content_types)
async def test_any_json_value_gets_a_json_2xx_or_4xx(env, value, how, ctype):
    for path in ("/v1/fetch", "/v1/batch"):
        body = env.steer_body(value)
        await env.post(path, encode(body, how), ctype, how)


@FUZZ_SETTINGS
@given(obj=target_objects, how=encodings)
async def test_any_target_object_on_fetch_gets_a_json_2xx_or_4xx(env, obj, how):
    status, answer = await env.post("/v1/fetch", encode(env.steer_body(obj), how), enc=how)
    assert (status == 200) == answer["success"]


@FUZZ_SETTINGS
@given(obj=batch_objects, how=encodings)
async def test_any_batch_object_gets_a_json_2xx_or_4xx(env, obj, how):
    status, answer = await env.post("/v1/batch", encode(env.steer_body(obj), how), enc=how)
    assert (status == 202) == answer["success"]
    if status in (400, 422) and "idx" in answer:
        assert answer["error"].startswith(f"target {answer['idx']}: ")


@FUZZ_SETTINGS
@given(data=garbage, ctype=content_types, enc=st.sampled_from(["", "gzip", "deflate"]))
async def test_random_and_invalid_utf8_bytes_get_a_json_4xx(env, data, ctype, enc):
    for path in ("/v1/fetch", "/v1/batch"):
        status, _ = await env.post(path, data, ctype, enc)
        assert 400 <= status < 500 or status in (200, 202)


async def test_a_body_that_is_not_its_content_encoding_is_400_json(env):
    for enc in ("gzip", "deflate"):
        for path in ("/v1/fetch", "/v1/batch"):
            status, answer = await env.post(path, b"\xff\x00not compressed", enc=enc)
            assert status == 400 and "could not be read" in answer["error"]


async def test_an_empty_compressed_body_is_the_json_400_for_an_empty_body(env):
    for enc in ("gzip", "deflate", "br"):
        status, answer = await env.post("/v1/fetch", b"", enc=enc)
        assert status in (400, 415) and not answer["success"], (enc, answer)
    status, answer = await env.post("/v1/fetch", b"", enc="gzip")
    assert (status, answer["error"]) == (400, "request body is empty; expected a JSON object")


async def test_an_unsupported_content_encoding_is_a_json_415_naming_it(env):
    for enc in ("br", "zstd", "compress", "gzip, gzip"):
        for path in ("/v1/fetch", "/v1/batch"):
            status, answer = await env.post(path, b"{}", enc=enc)
            assert status == 415 and repr(enc) in answer["error"], (enc, path, answer)


async def test_gzip_zlib_raw_deflate_and_identity_bodies_are_all_read(env):
    raw = b'{"url": "ftp://example.org/"}'  # parsed, then refused by the pre-check: 422
    squeezer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    bodies = {
        "gzip": gzip.compress(raw),
        "x-gzip": gzip.compress(raw),
        "deflate": zlib.compress(raw),
        "identity": raw,
    }
    for enc, data in bodies.items():
        status, answer = await env.post("/v1/fetch", data, enc=enc)
        assert status == 422 and "scheme" in answer["error"], (enc, answer)
    raw_deflate = squeezer.compress(raw) + squeezer.flush()
    status, answer = await env.post("/v1/fetch", raw_deflate, enc="deflate")
    assert status == 422, answer


async def test_a_truncated_or_padded_gzip_body_is_a_json_400(env):
    whole = gzip.compress(b'{"url": "http://127.0.0.1/"}')
    for data, reason in ((whole[:-6], "truncated"), (whole + b"junk", "data after")):
        status, answer = await env.post("/v1/fetch", data, enc="gzip")
        assert status == 400 and reason in answer["error"], answer


async def test_a_compressed_body_over_the_cap_is_413_after_decompression(env):
    small = gzip.compress(b'{"url": "' + b"a" * 70_000 + b'"}')
    assert len(small) < 1024
    status, _ = await env.post("/v1/fetch", small, enc="gzip")
    assert status == 413
