"""Digest: passages, BM25 ranking, extractive answers, and the OpenAI-compatible backend
against a real fake endpoint on loopback, with answers cached in a real database by class."""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import replace

import aiohttp
import pytest
from aiohttp import web

from sift.config import DigestConfig
from sift.errors import Timeout, Upstream5xx, UpstreamUnreachable
from sift.fetch.digest import (
    NO_MATCH,
    NO_TEXT,
    answer,
    digest_key,
    rank,
    scores,
    split_passages,
    terms,
)
from sift.store.cache import DigestCache
from sift.store.db import Database

ARTICLE = """# Harbour town votes to rebuild its tidal mill

Residents of Saltmarsh Quay voted on Thursday to rebuild the town's tidal mill.

## How the mill will work

A sluice gate lets the rising tide fill a millpond; as the tide falls the water turns a wheel.
The wheel will drive a small generator that powers the lifeboat station.

## Costs and timetable

The project is expected to cost 2.4 million, of which the lottery fund pledged 1.6 million.

Opponents said the money would be better spent on flood defences."""


# passages


def test_short_paragraphs_merge_up_to_the_target_size():
    text = "\n\n".join(f"Paragraph {i} is short." for i in range(10))
    passages = split_passages(text, target=100, max_chars=300)
    assert 1 < len(passages) < 10
    assert all(len(p) <= 100 for p in passages)
    assert "\n\n".join(passages) == text


def test_long_paragraph_is_split_at_sentences_within_max():
    text = " ".join(f"Sentence number {i} talks about the mill wheel." for i in range(100))
    passages = split_passages(text, target=300, max_chars=500)
    assert len(passages) > 5
    assert all(len(p) <= 500 for p in passages)
    assert all(p.endswith(".") for p in passages)


def test_unbroken_text_is_still_bounded():
    passages = split_passages("x" * 5000, max_chars=1000)
    assert all(len(p) <= 1000 for p in passages)
    assert sum(len(p) for p in passages) == 5000


def test_heading_stays_with_the_paragraph_after_it():
    passages = split_passages(ARTICLE, target=120, max_chars=400)
    costs = next(p for p in passages if "## Costs and timetable" in p)
    assert "2.4 million" in costs


def test_blank_content_has_no_passages():
    assert split_passages("  \n\n \n") == []


# ranking


def test_inflected_words_match():
    assert terms("Tides running") == terms("tide runs")


def test_rank_puts_the_passage_sharing_rare_words_first():
    passages = split_passages(ARTICLE, target=10, max_chars=400)
    best = rank(passages, "How much will the project cost?", k=2)
    assert "2.4 million" in best[0]


def test_rank_returns_at_most_k_and_only_matching_passages():
    passages = ["the mill wheel", "a wheel of cheese", "flood defences", "cart wheel", "mill pond"]
    assert rank(passages, "mill wheel", k=2) == ["the mill wheel", "mill pond"]
    assert len(rank(passages, "mill wheel", k=10)) == 4


def test_rank_ties_keep_document_order():
    passages = ["tide one", "tide two", "tide three"]
    assert rank(passages, "tide", k=3) == passages


def test_stop_words_alone_match_nothing():
    assert scores(["the mill", "of the quay"], "what is the") == [0.0, 0.0]


# extractive answers


async def test_extractive_answer_is_the_best_passages():
    d = await answer("What will the generator power?", ARTICLE, cfg=DigestConfig())
    assert d.answer_by == "passages"
    assert "lifeboat station" in d.context[0]
    assert d.answer.startswith(d.context[0])
    assert len(d.context) <= DigestConfig().passages


async def test_extractive_answer_without_match_gives_the_page_opening():
    d = await answer("zebra quagga okapi?", ARTICLE, cfg=DigestConfig(passages=1))
    assert d.answer.startswith(NO_MATCH)
    assert d.context == [split_passages(ARTICLE)[0]]


async def test_empty_content_says_so():
    d = await answer("anything?", "   ", cfg=DigestConfig())
    assert (d.answer, d.answer_by, d.context) == (NO_TEXT, "passages", [])


async def test_extractive_answers_are_not_cached():
    calls = []

    async def cache_get(key):
        calls.append(key)

    await answer("cost?", ARTICLE, cfg=DigestConfig(), cache_get=cache_get)
    assert calls == []


async def test_ranking_runs_through_the_given_cpu_runner():
    used = []

    async def run_cpu(fn, *args):
        used.append(fn.__name__)
        return fn(*args)

    await answer("cost?", ARTICLE, cfg=DigestConfig(), run_cpu=run_cpu)
    assert used == ["prepare"]


# the openai backend, against a fake endpoint on loopback


class FakeLLM:
    def __init__(self):
        self.requests: list[dict] = []
        self.behaviour = "ok"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append({"auth": request.headers.get("Authorization"), "body": body})
        if self.behaviour == "500":
            return web.Response(status=500, text="model crashed")
        if self.behaviour == "slow":
            await asyncio.sleep(3)
        if self.behaviour == "malformed":
            return web.Response(text="{not json", content_type="application/json")
        if self.behaviour == "wrong-shape":
            return web.json_response({"choices": []})
        return web.json_response(
            {"choices": [{"message": {"role": "assistant", "content": " It powers the station. "}}]}
        )


@pytest.fixture
async def llm(aiohttp_server):
    fake = FakeLLM()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    server = await aiohttp_server(app)
    fake.cfg = DigestConfig(
        backend="openai",
        base_url=str(server.make_url("/v1")),
        model="tiny-model",
        api_key_env="SIFT_TEST_LLM_KEY",
        timeout=5.0,
    )
    return fake


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as s:
        yield s


async def test_model_answer_comes_from_the_endpoint(llm, session, monkeypatch):
    monkeypatch.setenv("SIFT_TEST_LLM_KEY", "sk-test")
    d = await answer("What will the generator power?", ARTICLE, cfg=llm.cfg, session=session)
    assert d.answer == "It powers the station."
    assert d.answer_by == "tiny-model"
    assert "lifeboat station" in d.context[0]
    sent = llm.requests[0]
    assert sent["auth"] == "Bearer sk-test"
    assert sent["body"]["model"] == "tiny-model"
    user = sent["body"]["messages"][-1]["content"]
    assert "What will the generator power?" in user
    assert "[1] " in user and "lifeboat station" in user


async def test_no_authorization_header_without_a_key(llm, session, monkeypatch):
    monkeypatch.delenv("SIFT_TEST_LLM_KEY", raising=False)
    await answer("cost?", ARTICLE, cfg=llm.cfg, session=session)
    assert llm.requests[0]["auth"] is None


async def test_works_without_a_session(llm):
    d = await answer("cost?", ARTICLE, cfg=llm.cfg)
    assert d.answer == "It powers the station."


async def test_endpoint_500_is_upstream_5xx(llm, session):
    llm.behaviour = "500"
    with pytest.raises(Upstream5xx) as e:
        await answer("cost?", ARTICLE, cfg=llm.cfg, session=session)
    assert e.value.status == 502
    assert e.value.hint == "retry"
    assert "HTTP 500" in e.value.msg


@pytest.mark.timeout(20)
async def test_slow_endpoint_is_timeout(llm, session):
    llm.behaviour = "slow"
    cfg = replace(llm.cfg, timeout=0.3)
    with pytest.raises(Timeout) as e:
        await answer("cost?", ARTICLE, cfg=cfg, session=session)
    assert e.value.status == 504


@pytest.mark.parametrize("behaviour", ["malformed", "wrong-shape"])
async def test_malformed_answer_is_upstream_5xx(llm, session, behaviour):
    llm.behaviour = behaviour
    with pytest.raises(Upstream5xx) as e:
        await answer("cost?", ARTICLE, cfg=llm.cfg, session=session)
    assert "malformed" in e.value.msg


async def test_unreachable_endpoint_is_upstream_unreachable(session):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = DigestConfig(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m")
    with pytest.raises(UpstreamUnreachable) as e:
        await answer("cost?", ARTICLE, cfg=cfg, session=session)
    assert e.value.hint == "retry"


# caching by caller class, in the real digest cache


@pytest.fixture
def digests(state_dir):
    db = Database(state_dir / "sift.db")
    yield db, DigestCache(db, ttl=3600)
    db.close()


def bound(db: Database, cache: DigestCache, caller_class: str, now: float = 1000.0):
    async def cache_get(key):
        return await cache.get(caller_class, key, now)

    async def cache_put(key, value):
        await cache.put(caller_class, key, value, now)

    return {"cache_get": cache_get, "cache_put": cache_put}


async def test_model_answers_are_cached_per_caller_class(llm, session, digests):
    db, cache = digests
    first = await answer(
        "cost?", ARTICLE, cfg=llm.cfg, session=session, **bound(db, cache, "fleet")
    )
    again = await answer(
        "cost?", ARTICLE, cfg=llm.cfg, session=session, **bound(db, cache, "fleet")
    )
    assert again == first
    assert len(llm.requests) == 1
    await answer("cost?", ARTICLE, cfg=llm.cfg, session=session, **bound(db, cache, "restricted"))
    assert len(llm.requests) == 2


async def test_cache_key_covers_model_question_and_content():
    cfg = DigestConfig(backend="openai", base_url="http://127.0.0.1:1/v1", model="a")
    key = digest_key(cfg, "q", "content")
    assert key == digest_key(cfg, "q", "content")
    assert (
        len(
            {
                key,
                digest_key(replace(cfg, model="b"), "q", "content"),
                digest_key(cfg, "q2", "content"),
                digest_key(cfg, "q", "content2"),
            }
        )
        == 4
    )


async def test_corrupt_cache_entry_is_ignored(llm, session):
    async def cache_get(key):
        return "{not json"

    d = await answer("cost?", ARTICLE, cfg=llm.cfg, session=session, cache_get=cache_get)
    assert d.answer == "It powers the station."
    assert json.dumps(d.context)
