"""The web archive's answer is upstream bytes too: it is read in a render child, never in the
serving process (docs/SECURITY.md §Bounds on upstream bytes). Real pipeline, loopback site."""

from __future__ import annotations

import os
import types

import orjson
import pytest

from sift import config
from sift.auth import Caller
from sift.fetch import recover
from sift.fetch.pipeline import Pipeline
from sift.fetch.target import parse_target
from sift.store import open_store
from tests.site import make_site


@pytest.fixture
async def pipeline(aiohttp_server, state_dir):
    site = await aiohttp_server(make_site())
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
            "recover": {"archive_url": f"http://127.0.0.1:{site.port}"},
            "cache": {"ttl": 0},
        }
    )
    p = await Pipeline.open(cfg, open_store(cfg))
    p.base = f"http://127.0.0.1:{site.port}"
    yield p
    await p.close()
    p.store.close()


async def test_the_archives_answer_is_never_parsed_in_the_serving_process(pipeline, monkeypatch):
    parsed_in: list[int] = []

    def loads(data):
        parsed_in.append(os.getpid())
        return orjson.loads(data)

    monkeypatch.setattr(
        recover,
        "orjson",
        types.SimpleNamespace(loads=loads, JSONDecodeError=orjson.JSONDecodeError),
    )
    target = parse_target({"url": f"{pipeline.base}/status/500", "recover": True})
    envelope = await pipeline.fetch_target(Caller("agent"), target)
    assert envelope["source"] == "archive"
    assert os.getpid() not in parsed_in
