"""POST /v1/fetch end to end over loopback: the envelope of docs/API.md §POST /v1/fetch and its
§Failure table."""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest

from sift import config
from sift.api.app import create_app
from sift.auth import add_key
from tests.site import HITS, TECH_ARTICLE_METADATA, FakeResolver, make_site


@pytest.fixture
async def blocked_listener():
    """A listener on 127.0.0.2 (not allowed): it must never accept a connection."""
    accepted: list[int] = []

    async def on_conn(reader, writer):
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.2", 0)
    port = server.sockets[0].getsockname()[1]
    yield port, accepted
    server.close()
    await server.wait_closed()


@pytest.fixture
async def env(aiohttp_server, aiohttp_client, state_dir, blocked_listener):
    blocked_port, accepted = blocked_listener
    site = await aiohttp_server(make_site(blocked_port=blocked_port))
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {
                "allow_networks": ["127.0.0.1/32"],
                "allowed_ports": [site.port, blocked_port],
            },
            "recover": {"archive_url": f"http://127.0.0.1:{site.port}"},
            "fetch": {"timeout": 2, "max_body": 1024 * 1024, "output_cap": 5000},
        }
    )
    fleet = add_key(cfg.keys_file, "agent")
    restricted = add_key(cfg.keys_file, "secret-agent", restricted=True)
    client = await aiohttp_client(
        create_app(
            cfg, resolver=FakeResolver({"blocked.test": ["127.0.0.2"], "site.test": ["127.0.0.1"]})
        )
    )

    class Env:
        base = f"http://127.0.0.1:{site.port}"
        hits = site.app[HITS]

        async def fetch(self, body, key=fleet):
            resp = await client.post(
                "/v1/fetch", json=body, headers={"Authorization": f"Bearer {key}"}
            )
            return resp.status, await resp.json()

    e = Env()
    e.client, e.accepted, e.blocked_port, e.restricted = client, accepted, blocked_port, restricted
    return e


async def test_clean_mode_returns_the_success_envelope(env):
    status, body = await env.fetch({"url": f"{env.base}/article/1"})
    assert status == 200, body
    assert body["success"] is True
    assert body["url"] == body["final_url"] == f"{env.base}/article/1"
    assert body["status"] == 200 and body["content_type"] == "text/html"
    assert body["mode"] == "clean" and body["source"] == "live" and body["cached"] is False
    assert "breakwater will be rebuilt" in body["content"]
    assert "cookies" not in body["content"].lower()
    assert body["chars"] == len(body["content"]) and body["bytes"] > body["chars"] // 2
    assert body["truncated"] is False
    assert body["fetched_at"].endswith("Z")


async def test_a_second_fetch_is_served_from_the_content_cache(env):
    await env.fetch({"url": f"{env.base}/article/2"})
    status, body = await env.fetch({"url": f"{env.base}/article/2"})
    assert status == 200 and body["cached"] is True
    assert env.hits.count("/article/2") == 1


async def test_the_cache_never_crosses_caller_classes(env):
    await env.fetch({"url": f"{env.base}/article/3"})
    status, body = await env.fetch({"url": f"{env.base}/article/3"}, key=env.restricted)
    assert status == 200 and body["cached"] is False
    assert env.hits.count("/article/3") == 2


async def test_redirects_are_followed_and_reported_as_final_url(env):
    status, body = await env.fetch({"url": f"{env.base}/redirect?to=/article/4"})
    assert status == 200 and body["final_url"] == f"{env.base}/article/4"


async def test_a_redirect_to_a_loopback_address_that_is_not_allowed_is_blocked(env):
    status, body = await env.fetch({"url": f"{env.base}/to-blocked"})
    assert status in (403, 422), body
    assert body["success"] is False
    assert env.accepted == []


async def test_too_many_redirects_fail_clearly(env):
    status, body = await env.fetch({"url": f"{env.base}/loop/0"})
    assert status == 502 and "redirect" in body["error"]


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("ftp://127.0.0.1/x", 422),
        ("http://127.0.0.1:22/", 422),
        ("http://user:pw@127.0.0.1/", 422),
        ("http://10.0.0.1/", 422),
        ("http://[::1]/", 422),
        ("http://169.254.169.254/latest/meta-data/", 422),
    ],
)
async def test_urls_refused_by_the_pre_check_are_422(env, url, status):
    got, body = await env.fetch({"url": url})
    assert got == status and body["success"] is False and body["error"]


async def test_a_name_resolving_to_a_loopback_address_that_is_not_allowed_is_403(env):
    status, body = await env.fetch({"url": f"http://blocked.test:{env.blocked_port}/"})
    assert status == 403, body
    assert body["success"] is False and "blocked" in body["error"]
    assert env.accepted == []


async def test_a_name_resolving_to_an_allowed_loopback_address_is_fetched(env):
    port = env.base.rsplit(":", 1)[1]
    status, body = await env.fetch({"url": f"http://site.test:{port}/article/7"})
    assert status == 200, body


@pytest.mark.parametrize(
    ("path", "status", "hint"),
    [
        ("/status/404", 502, "recover"),
        ("/status/500", 502, "recover"),
        ("/botwall", 502, "browser"),
        ("/image.png", 415, None),
        ("/bomb", 413, None),
        ("/slow?s=5", 504, "retry"),
    ],
)
async def test_failures_get_the_status_and_hint_of_the_spec_table(env, path, status, hint):
    got, body = await env.fetch({"url": f"{env.base}{path}"})
    assert got == status, body
    assert body["success"] is False and isinstance(body["error"], str)
    if hint:
        assert body["hint"] == hint


async def test_upstream_errors_carry_the_upstream_status(env):
    _, body = await env.fetch({"url": f"{env.base}/status/503"})
    assert body["upstream_status"] == 503


async def test_gzip_bodies_are_decompressed(env):
    status, body = await env.fetch({"url": f"{env.base}/gz", "mode": "raw"})
    assert status == 200 and body["content"] == "hello compressed world"


async def test_grep_returns_matching_lines_with_numbers(env):
    status, body = await env.fetch({"url": f"{env.base}/plain.txt", "grep": "needle"})
    assert status == 200 and body["matches"] == 10
    assert "10: line 10: needle" in body["content"] or "10:" in body["content"]


async def test_jq_applies_to_json(env):
    status, body = await env.fetch({"url": f"{env.base}/data.json", "jq": ".items[].name"})
    assert status == 200
    assert "alpha" in body["content"] and "beta" in body["content"]


async def test_jq_on_a_non_json_page_is_400(env):
    status, body = await env.fetch({"url": f"{env.base}/article/5", "jq": "."})
    assert status == 400 and "JSON" in body["error"]


async def test_a_question_gets_an_extractive_answer_with_context(env):
    status, body = await env.fetch(
        {"url": f"{env.base}/article/6", "question": "How much will the project cost?"}
    )
    assert status == 200 and body["answer_by"] == "passages"
    assert "twelve million" in body["content"]
    assert isinstance(body["context"], list) and body["context"]


async def test_context_can_be_switched_off(env):
    _, body = await env.fetch(
        {"url": f"{env.base}/article/6", "question": "cost?", "context": False}
    )
    assert "context" not in body


async def test_output_cap_truncates_with_a_hint(env):
    status, body = await env.fetch({"url": f"{env.base}/big?words=5000", "mode": "text"})
    assert status == 200 and body["truncated"] is True
    assert body["chars"] <= 5000 and body["hint"]


async def test_recover_fetches_the_archived_copy(env):
    status, body = await env.fetch({"url": f"{env.base}/status/500", "recover": True})
    assert status == 200, body
    assert body["source"] == "archive" and body["archived_at"] == "2024-01-02T03:04:05Z"
    assert "Harbour breakwater" in body["content"]


@pytest.mark.parametrize(
    "payload",
    [
        b"{not json",
        b"[]",
        b'"x"',
        b"",
        b'{"url": 5}',
        b'{"url": "http://x/", "mode": "pdf"}',
        b'{"url": "http://x/", "context": "yes"}',
        b'{"url": "http://x/", "bogus": 1}',
        b'{"url": "http://x/", "grep": "a", "jq": "."}',
    ],
)
async def test_malformed_requests_are_400_json(env, payload):
    resp = await env.client.post(
        "/v1/fetch",
        data=payload,
        headers={"Authorization": f"Bearer {env.restricted}", "Content-Type": "application/json"},
    )
    assert resp.status == 400
    assert (await resp.json())["success"] is False


async def test_a_body_over_64_kib_is_413(env):
    resp = await env.client.post(
        "/v1/fetch",
        data=b"{" + b" " * (65 * 1024) + b"}",
        headers={"Authorization": f"Bearer {env.restricted}", "Content-Type": "application/json"},
    )
    assert resp.status == 413


async def test_unicode_urls_are_handled_without_a_500(env):
    status, body = await env.fetch({"url": "http://bücher.invalid:1/ü?q=✓"})
    assert status in (422, 403, 502), body


async def test_pdf_pages_are_selected_and_reported(env):
    status, body = await env.fetch({"url": f"{env.base}/doc.pdf", "pages": "2-3,5"})
    assert status == 200, body
    assert body["pages"] == {"total": 5, "returned": "2-3,5"}
    assert "Body text of page 2." in body["content"] and "page 4." not in body["content"]


async def test_pdf_pages_beyond_the_document_are_400(env):
    status, body = await env.fetch({"url": f"{env.base}/doc.pdf", "pages": "9-"})
    assert status == 400 and "5" in body["error"]


async def test_raw_mode_on_a_pdf_is_415(env):
    status, _ = await env.fetch({"url": f"{env.base}/doc.pdf", "mode": "raw"})
    assert status == 415


async def test_pages_on_an_html_page_is_400(env):
    status, _ = await env.fetch({"url": f"{env.base}/article/1", "pages": "1"})
    assert status == 400


async def test_a_script_only_page_fails_with_hint_browser(env):
    status, body = await env.fetch({"url": f"{env.base}/app"})
    assert status == 502 and body["hint"] == "browser"
    assert body["verdict"] == "bot_wall" and body["retryable"] is True


async def test_accept_verdicts_returns_a_failing_page_with_its_verdict(env):
    # docs/API.md §POST /v1/fetch: the per-target option returns the content anyway.
    status, body = await env.fetch({"url": f"{env.base}/app", "accept_verdicts": ["bot_wall"]})
    assert status == 200 and body["verdict"] == "bot_wall"


async def test_every_success_carries_a_verdict(env):
    status, body = await env.fetch({"url": f"{env.base}/article/8"})
    assert status == 200 and body["verdict"] == "ok"


async def test_a_bad_grep_pattern_is_400_before_anything_is_fetched(env):
    before = len(env.hits)
    status, body = await env.fetch({"url": f"{env.base}/plain.txt", "grep": "(unclosed"})
    assert status == 400 and "grep" in body["error"]
    assert len(env.hits) == before


@pytest.mark.parametrize("mode", ["markdown", "text", "links"])
async def test_every_mode_renders_the_article(env, mode):
    status, body = await env.fetch({"url": f"{env.base}/article/8", "mode": mode})
    assert status == 200 and body["mode"] == mode
    expected = "/news" if mode == "links" else "breakwater"
    assert expected in body["content"]


async def test_a_bad_jq_program_is_400_with_jqs_message(env):
    status, body = await env.fetch({"url": f"{env.base}/data.json", "jq": ".items[ | bad"})
    assert status == 400 and body["error"].startswith("jq")


async def test_a_runaway_jq_program_is_400_and_others_are_served_meanwhile(env):
    runaway = asyncio.create_task(env.fetch({"url": f"{env.base}/data.json", "jq": "def f: f; f"}))
    await asyncio.sleep(0.05)
    status, _ = await env.fetch({"url": f"{env.base}/article/9"})
    assert status == 200 and not runaway.done()
    status, body = await runaway
    assert status == 400 and "limit" in body["error"]


async def test_proxies_from_the_environment_are_ignored(
    aiohttp_server, aiohttp_client, state_dir, monkeypatch
):
    seen: list[int] = []

    async def recorder(reader, writer):
        seen.append(1)
        writer.close()

    proxy = await asyncio.start_server(recorder, "127.0.0.1", 0)
    proxy_url = f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}"
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(var, proxy_url)
    site = await aiohttp_server(make_site())
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
        }
    )
    key = add_key(cfg.keys_file, "agent")
    client = await aiohttp_client(create_app(cfg))
    resp = await client.post(
        "/v1/fetch",
        json={"url": f"http://127.0.0.1:{site.port}/article/1"},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert resp.status == 200
    proxy.close()
    await proxy.wait_closed()
    assert seen == []


async def test_no_page_renders_in_the_server_whatever_its_size(env, monkeypatch):
    from sift.fetch import render

    in_parent: list[int] = []
    real = render.render

    def recording(kind, body, *args, **kwargs):
        in_parent.append(len(body))
        return real(kind, body, *args, **kwargs)

    monkeypatch.setattr(render, "render", recording)
    for path in ("/plain.txt", "/article/1", "/big?words=70000"):
        status, body = await env.fetch({"url": f"{env.base}{path}", "grep": "e"})
        assert status == 200, body
        assert body["chars"] > 0
    assert in_parent == []


async def test_the_content_cache_write_proceeds_during_the_render(env, monkeypatch):
    from sift.fetch.renderpool import RenderPool
    from sift.store.cache import ContentCache

    put_started = threading.Event()
    seen_during_render: list[bool] = []
    real_put, real_run = ContentCache.put, RenderPool.run

    def put(self, *args, **kwargs):
        put_started.set()
        return real_put(self, *args, **kwargs)

    async def rendering(self, *args, **kwargs):
        seen_during_render.append(await asyncio.to_thread(put_started.wait, 5))
        return await real_run(self, *args, **kwargs)

    monkeypatch.setattr(ContentCache, "put", put)
    monkeypatch.setattr(RenderPool, "run", rendering)
    status, body = await env.fetch({"url": f"{env.base}/article/1"})
    assert status == 200, body
    assert seen_during_render == [True]


# Page metadata and the links/images options (docs/API.md §Success envelope)


async def test_the_envelope_carries_the_pages_metadata(env):
    status, body = await env.fetch({"url": f"{env.base}/pages/tech_article"})
    assert status == 200, body
    assert body["metadata"] == TECH_ARTICLE_METADATA
    assert body["final_url"] == f"{env.base}/pages/tech_article" and body["status"] == 200


async def test_metadata_fields_are_null_when_the_content_is_not_html(env):
    status, body = await env.fetch({"url": f"{env.base}/data.json"})
    assert status == 200, body
    assert body["metadata"] == dict.fromkeys(
        ("title", "description", "author", "published", "language", "site_name", "canonical_url")
    )


async def test_links_and_images_are_in_clean_content_unless_turned_off(env):
    url = f"{env.base}/pages/tech_article"
    _, full = await env.fetch({"url": url})
    assert "[SQLite WAL documentation](https://www.sqlite.org/wal.html)" in full["content"]
    assert f"]({env.base}/img/checkpoints.png)" in full["content"]
    _, bare = await env.fetch({"url": url, "links": False, "images": False})
    assert "See the SQLite WAL documentation and our full benchmark write-up" in bare["content"]
    assert "](" not in bare["content"]
    assert "*Checkpoint duration over a typical week of traffic.*" in bare["content"]


@pytest.mark.parametrize("field", ["links", "images"])
async def test_links_and_images_must_be_booleans(env, field):
    status, body = await env.fetch({"url": f"{env.base}/pages/tech_article", field: "no"})
    assert status == 400 and field in body["error"]


async def test_a_restricted_callers_log_lines_carry_no_page_metadata(env, caplog):
    caplog.set_level(logging.INFO, logger="sift")
    status, body = await env.fetch({"url": f"{env.base}/pages/tech_article"}, key=env.restricted)
    assert status == 200 and body["metadata"]["author"] == "Morgan Tide"
    lines = [r for r in caplog.records if r.name.startswith("sift")]
    assert any(r.getMessage() == "fetched" for r in lines)
    for r in lines:
        logged = json.dumps(getattr(r, "fields", {})) + r.getMessage()
        for value in body["metadata"].values():
            assert value not in logged
        assert body["title"] not in logged


# -- hints never send a caller in circles (docs/API.md §Hints) --------------------------------


@pytest.mark.parametrize("code", [429, 502, 503, 504])
async def test_an_upstream_status_that_means_not_now_hints_retry(env, code):
    status, body = await env.fetch({"url": f"{env.base}/status/{code}"})
    assert status == 502 and body["hint"] == "retry" and body["upstream_status"] == code


async def test_a_failed_recover_has_no_recover_hint(env):
    status, body = await env.fetch({"url": f"{env.base}/status/404?nothing", "recover": True})
    assert status == 502 and "recover failed" in body["error"]
    assert "hint" not in body


async def test_a_failed_recover_of_a_transient_failure_still_hints_retry(env):
    status, body = await env.fetch({"url": f"{env.base}/status/503?nothing", "recover": True})
    assert status == 502 and "recover failed" in body["error"] and body["hint"] == "retry"


async def test_a_grep_without_a_match_is_empty_content_and_a_note(env):
    status, body = await env.fetch({"url": f"{env.base}/plain.txt", "grep": "no-such-word"})
    assert status == 200 and body["content"] == "" and body["matches"] == 0
    assert body["note"] == "grep: no line matches the pattern; the content is empty"
    _, found = await env.fetch({"url": f"{env.base}/plain.txt", "grep": "needle"})
    assert "note" not in found


async def test_a_refused_port_names_the_config_key_to_change(env):
    status, body = await env.fetch({"url": "http://127.0.0.1:22/"})
    assert status == 422 and "[guard] allowed_ports" in body["error"]


async def test_a_blocked_address_names_the_config_key_to_change(env):
    status, body = await env.fetch({"url": f"http://10.0.0.1:{env.blocked_port}/"})
    assert status == 422 and "[guard] allow_networks" in body["error"]
    status, body = await env.fetch({"url": f"http://blocked.test:{env.blocked_port}/"})
    assert status == 403 and body["error"].endswith(
        "to allow it, add its network to [guard] allow_networks"
    )
