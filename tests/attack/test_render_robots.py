"""robots.txt is parsed in a render child, once per origin, and the rules a process keeps are
bounded in bytes (docs/SECURITY.md §Bounds on upstream bytes).

The real pipeline over loopback, names resolved by canned answers to the test site, a real
database file and real render children. The hostile file is `tests.bombs.robots_wildcards`:
500 KiB of wildcard rules for every agent, about 20 MiB of protego objects once parsed.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protego import Protego
from yarl import URL

from sift import config
from sift.auth import Caller
from sift.errors import RobotsDisallowed
from sift.fetch import robotsrules
from sift.fetch.pipeline import Pipeline
from sift.fetch.renderpool import RenderPool
from sift.fetch.robots import RULES_MEMORY
from sift.store import open_store
from tests.bombs import robots_wildcards
from tests.site import HITS, ROBOTS, FakeResolver, make_site

ORIGINS = 12
RSS_GROWTH_MAX = 80 * 1024 * 1024  # the old in-process parse grew it by ~20 MiB per origin


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
async def env(aiohttp_server, state_dir):
    site = await aiohttp_server(make_site())
    names = {f"o{n}.test": ["127.0.0.1"] for n in range(ORIGINS)}
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
            "fetch": {"timeout": 10, "user_agent": "Sift/0.1 (+test)", "robots": "always"},
            "cache": {"ttl": 0},
            # The parent's bytes are what this file bounds; twelve parses at once need more
            # than the pool's default budget (docs/SECURITY.md §The render pool's memory budget).
            "render": {"timeout": 20, "pool_memory": "512MiB"},
        }
    )
    pipeline = await Pipeline.open(cfg, open_store(cfg), resolver=FakeResolver(names))
    pipeline.site = site
    yield pipeline
    await pipeline.close()
    pipeline.store.close()


def url(env, n: int, path: str = "/article/1") -> URL:
    return URL(f"http://o{n}.test:{env.site.port}{path}")


async def test_many_origins_with_a_wildcard_heavy_robots_txt_keep_the_process_rss_bounded(env):
    env.site.app[ROBOTS].update(status=200, body=robots_wildcards())
    await env.robots.check(url(env, 0), "warm")  # the pool, the store and the client are up
    before, peak = rss(), 0

    async def one(n: int) -> None:
        nonlocal peak
        await env.robots.check(url(env, n), f"caller{n}")
        peak = max(peak, rss())

    await asyncio.gather(*(one(n) for n in range(1, ORIGINS)))
    assert peak - before < RSS_GROWTH_MAX, (before, peak)
    assert env.robots.kept_bytes <= RULES_MEMORY


async def test_the_rules_a_process_keeps_are_bounded_in_bytes_not_entries(env):
    env.site.app[ROBOTS].update(status=200, body=robots_wildcards(64))
    env.robots.memory = 256 * 1024  # about four of these files' rules
    for n in range(ORIGINS):
        await env.robots.check(url(env, n), "caller")
        assert env.robots.kept_bytes <= env.robots.memory
    assert 1 < len(env.robots._parsed) < ORIGINS


async def test_concurrent_first_fetches_of_one_origin_share_one_parse(env, monkeypatch):
    env.site.app[ROBOTS].update(status=200, body="User-agent: *\nDisallow: /private/\n", delay=0.3)
    parses = []
    real_run = RenderPool.run

    async def counting(self, owner, fn, *args, **kwargs):
        if fn is robotsrules.read_rules:
            parses.append(owner)
        return await real_run(self, owner, fn, *args, **kwargs)

    monkeypatch.setattr(RenderPool, "run", counting)
    checks = [env.robots.check(url(env, 0, f"/article/{n}"), f"caller{n}") for n in range(8)]
    await asyncio.gather(*checks)
    assert len(parses) == 1
    assert env.site.app[HITS].count("/robots.txt") == 1
    with pytest.raises(RobotsDisallowed, match="disallows /private/"):
        await env.robots.check(url(env, 0, "/private/x"), "caller0")


async def test_robots_txt_is_never_parsed_in_the_serving_process(env, monkeypatch):
    env.site.app[ROBOTS].update(status=200, body="User-agent: *\nDisallow: /private/\n")
    here = os.getpid()
    parsed_in = []
    real_parse = Protego.parse

    def recording(*args, **kwargs):
        parsed_in.append(os.getpid())
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(Protego, "parse", recording)
    with pytest.raises(RobotsDisallowed):
        await env.fetch_target(Caller("agent"), _target(url(env, 3, "/private/x")))
    assert here not in parsed_in


def _target(u: URL):
    from sift.fetch.target import parse_target

    return parse_target({"url": str(u)})


# first_match decides as protego does (RFC 9309 §2.2.2: longest match, Allow on a tie).

_piece = st.sampled_from(["/", "a", "b", "ab", "*", "x/", ".html", "?q=", "%41", "é"])
_pattern = st.lists(_piece, min_size=1, max_size=5).map("".join)
_path = st.lists(st.sampled_from(["/", "a", "b", "x", ".html", "?q=1", "é"]), max_size=6).map(
    lambda parts: "/" + "".join(parts)
)


@settings(max_examples=150, deadline=None)
@given(
    rules=st.lists(
        st.tuples(st.booleans(), _pattern, st.booleans()),
        max_size=6,
    ),
    path=_path,
)
def test_first_match_decides_as_protego_does(rules, path):
    lines = ["User-agent: *"]
    for allow, pattern, anchored in rules:
        lines.append(f"{'Allow' if allow else 'Disallow'}: {pattern}{'$' if anchored else ''}")
    body = "\n".join(lines) + "\n"
    ours = robotsrules.read_rules(body, "Sift")
    decided = robotsrules.first_match(ours, robotsrules_path(path))
    allowed = decided is None or decided[0]
    assert allowed == Protego.parse(body).can_fetch("https://example.test" + path, "Sift")


def robotsrules_path(path: str) -> str:
    from protego._utils import _quote_path

    return _quote_path("https://example.test" + path)


def test_kept_rules_cost_about_their_files_text_not_objects_per_rule():
    """docs/SECURITY.md §Bounds on upstream bytes: the rules of a 500 KiB wildcard file, as
    they come back from a render child and are kept, hold about the file's text (3.7 MB of
    tuples and strings before), and the bound counts what they really hold."""
    body = robots_wildcards()
    parsed = robotsrules.read_rules(body, "sift")
    wire = pickle.dumps(parsed, protocol=5)
    del parsed
    tracemalloc.start()
    try:
        kept = pickle.loads(wire)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept.allows) > 20_000
    assert held < len(body) * 1.2, held
    assert held <= kept.nbytes
