"""robots.txt, Crawl-delay and Retry-After (docs/WORKER.md §robots.txt, §Spacing and waits),
over loopback with the real pipeline and a real database file.

Each test serves its own site, so each has its own origin and its own host key. Time is
injected: a `Clock` the test moves, shared by the pipeline and its HTTP client.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from sift import config
from sift.auth import Caller
from sift.errors import HostWait, RobotsDisallowed, Timeout, Upstream4xx, Upstream5xx
from sift.fetch.pipeline import Pipeline
from sift.fetch.robots import ROBOTS_MAX_BYTES
from sift.fetch.target import parse_target
from sift.store import open_store
from sift.timefmt import rfc3339
from tests.clock import Clock
from tests.site import HITS, ROBOTS, make_site

AGENT = Caller("agent")
T0 = 1_900_000_000.0


@pytest.fixture
async def env(aiohttp_server, state_dir):
    site = await aiohttp_server(make_site())
    pipelines = []
    clock = Clock(T0)

    async def pipeline(**fetch):
        cfg = config.from_dict(
            {
                "store": {"state_dir": str(state_dir)},
                "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
                "fetch": {"timeout": 1, "user_agent": "Sift/0.1 (+test)", **fetch},
                "cache": {"ttl": 0},
            }
        )
        p = await Pipeline.open(cfg, open_store(cfg), clock=clock)
        pipelines.append(p)
        return p

    class Env:
        base = f"http://127.0.0.1:{site.port}"
        robots = site.app[ROBOTS]
        hits = site.app[HITS]

        def robots_hits(self) -> int:
            return self.hits.count("/robots.txt")

    e = Env()
    e.pipeline, e.clock = pipeline, clock
    yield e
    for p in pipelines:
        await p.close()
        p.store.close()


def target(url: str):
    return parse_target({"url": url})


async def fetch(p: Pipeline, url: str, *, background: bool = True):
    return await p.fetch_target(AGENT, target(url), background=background)


# -- robots.txt -------------------------------------------------------------------------------


async def test_a_disallowed_batch_target_fails_with_robots_naming_the_rule_path(env):
    env.robots.update(status=200, body="User-agent: *\nDisallow: /article/\n")
    p = await env.pipeline()
    with pytest.raises(RobotsDisallowed) as err:
        await fetch(p, f"{env.base}/article/1")
    e = err.value
    assert e.status == 403 and e.outcome == "robots"
    assert e.msg == "robots.txt disallows /article/ for this agent"
    assert e.envelope()["retryable"] is False and e.envelope()["retry_after"] is None
    assert "/article/1" not in env.hits
    assert (await fetch(p, f"{env.base}/data.json"))["success"] is True


async def test_an_interactive_fetch_ignores_robots_unless_always(env):
    env.robots.update(status=200, body="User-agent: *\nDisallow: /\n")
    batch_default = await env.pipeline()
    assert (await fetch(batch_default, f"{env.base}/article/1", background=False))["success"]
    assert env.robots_hits() == 0
    always = await env.pipeline(robots="always")
    with pytest.raises(RobotsDisallowed):
        await fetch(always, f"{env.base}/article/2", background=False)


async def test_robots_never_fetches_no_robots_txt(env):
    env.robots.update(status=200, body="User-agent: *\nDisallow: /\n")
    p = await env.pipeline(robots="never")
    assert (await fetch(p, f"{env.base}/article/1"))["success"]
    assert env.robots_hits() == 0


async def test_the_product_token_of_our_user_agent_is_the_one_matched(env):
    env.robots.update(
        status=200,
        body="User-agent: *\nDisallow: /\n\nUser-agent: sift\nDisallow: /plain.txt\n\n"
        "User-agent: siftbot\nDisallow: /data.json\n",
    )
    p = await env.pipeline()
    assert (await fetch(p, f"{env.base}/data.json"))["success"]
    with pytest.raises(RobotsDisallowed, match=r"disallows /plain\.txt"):
        await fetch(p, f"{env.base}/plain.txt")


async def test_robots_4xx_allows_everything(env):
    env.robots.update(status=404, body="")
    p = await env.pipeline()
    assert (await fetch(p, f"{env.base}/article/1"))["success"]
    assert env.robots_hits() == 1


async def test_robots_5xx_disallows_everything_and_is_retryable(env):
    env.robots.update(status=500, body="User-agent: *\nAllow: /\n")
    p = await env.pipeline()
    with pytest.raises(RobotsDisallowed, match="disallows / for this agent") as err:
        await fetch(p, f"{env.base}/article/1")
    body = err.value.envelope()
    assert body["retryable"] is True and body["retry_after"] is not None
    assert "/article/1" not in env.hits


async def test_robots_that_times_out_disallows_everything(env):
    env.robots.update(status=200, body="", delay=3)
    p = await env.pipeline(timeout=0.3)
    with pytest.raises(RobotsDisallowed, match="could not be read"):
        await fetch(p, f"{env.base}/article/1")
    assert "/article/1" not in env.hits


async def test_robots_is_read_once_per_origin_and_shared_through_the_store(env):
    env.robots.update(status=200, body="User-agent: *\nDisallow: /plain.txt\n")
    first = await env.pipeline()
    await fetch(first, f"{env.base}/article/1")
    await fetch(first, f"{env.base}/article/2")
    second = await env.pipeline()  # another process: its own connections, the same file
    with pytest.raises(RobotsDisallowed):
        await fetch(second, f"{env.base}/plain.txt")
    assert env.robots_hits() == 1


async def test_robots_is_read_again_once_its_ttl_has_passed(env):
    env.robots.update(status=200, body="User-agent: *\nDisallow: /plain.txt\n")
    p = await env.pipeline(robots_ttl="1h")
    await fetch(p, f"{env.base}/article/1")
    env.robots.update(body="User-agent: *\nDisallow: /article/\n")
    env.clock.now += 3599
    await fetch(p, f"{env.base}/article/2")
    env.clock.now += 2
    with pytest.raises(RobotsDisallowed):
        await fetch(p, f"{env.base}/article/3")
    assert env.robots_hits() == 2


def test_robots_ttl_may_not_exceed_a_day():
    with pytest.raises(config.ConfigError, match="robots_ttl"):
        config.from_dict({"fetch": {"robots_ttl": "25h"}})


async def test_robots_is_read_up_to_500_kib_and_the_rest_ignored(env):
    filler = "# " + "x" * 1000 + "\n"
    head = "User-agent: *\nDisallow: /plain.txt\n"
    body = head + filler * (ROBOTS_MAX_BYTES // len(filler) + 1) + "Disallow: /data.json\n"
    env.robots.update(status=200, body=body)
    p = await env.pipeline()
    assert (await fetch(p, f"{env.base}/data.json"))["success"]
    with pytest.raises(RobotsDisallowed):
        await fetch(p, f"{env.base}/plain.txt")


# -- Crawl-delay ------------------------------------------------------------------------------


async def test_crawl_delay_spaces_batch_fetches_to_a_host(env):
    env.robots.update(status=200, body="User-agent: *\nCrawl-delay: 3\n")
    p = await env.pipeline()
    await fetch(p, f"{env.base}/article/1")
    env.clock.now += 1
    with pytest.raises(HostWait) as err:
        await fetch(p, f"{env.base}/article/2")
    assert err.value.retry_after == T0 + 3
    assert "/article/2" not in env.hits
    env.clock.now = T0 + 3
    assert (await fetch(p, f"{env.base}/article/2"))["success"]


async def test_crawl_delay_is_capped_by_crawl_delay_max(env):
    env.robots.update(status=200, body="User-agent: *\nCrawl-delay: 600\n")
    p = await env.pipeline(crawl_delay_max="5s")
    await fetch(p, f"{env.base}/article/1")
    with pytest.raises(HostWait) as err:
        await fetch(p, f"{env.base}/article/2")
    assert err.value.retry_after == T0 + 5


async def test_crawl_delay_is_shared_by_both_processes_and_spares_interactive_fetches(env):
    env.robots.update(status=200, body="User-agent: *\nCrawl-delay: 3\n")
    api, worker = await env.pipeline(), await env.pipeline()
    await fetch(worker, f"{env.base}/article/1")
    assert (await fetch(api, f"{env.base}/article/2", background=False))["success"]
    with pytest.raises(HostWait):
        await fetch(api, f"{env.base}/article/3")


# -- Retry-After ------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [429, 503])
async def test_retry_after_in_seconds_makes_the_hosts_batch_fetches_wait(env, code):
    p = await env.pipeline()
    with pytest.raises((Upstream4xx, Upstream5xx)) as err:
        await fetch(p, f"{env.base}/retry-after/{code}?after=120", background=False)
    body = err.value.envelope()
    assert body["retryable"] is True and body["retry_after"] == rfc3339(T0 + 120)
    with pytest.raises(HostWait) as wait:
        await fetch(p, f"{env.base}/article/1")
    assert wait.value.retry_after == T0 + 120
    assert (await fetch(p, f"{env.base}/article/1", background=False))["success"]
    env.clock.now = T0 + 120
    assert (await fetch(p, f"{env.base}/article/2"))["success"]


async def test_retry_after_from_a_redirects_final_host_holds_that_host_not_the_requested_one(
    aiohttp_server, state_dir
):
    """A caller fetching victim/redirect?to=other/429 must not hold everyone's batch fetches to
    the victim: the hold goes to the host that answered (docs/WORKER.md §Spacing and waits)."""
    victim = await aiohttp_server(make_site(), host="127.0.0.1")
    other = await aiohttp_server(make_site(), host="127.0.0.2")
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {
                "allow_networks": ["127.0.0.0/8"],
                "allowed_ports": [victim.port, other.port],
            },
            "fetch": {"timeout": 1, "user_agent": "Sift/0.1 (+test)"},
            "cache": {"ttl": 0},
        }
    )
    clock = Clock(T0)
    p = await Pipeline.open(cfg, open_store(cfg), clock=clock)
    try:
        answered = f"http://127.0.0.2:{other.port}/retry-after/429?after=120"
        with pytest.raises(Upstream4xx) as err:
            await fetch(p, f"http://127.0.0.1:{victim.port}/redirect?to={quote(answered)}")
        assert err.value.retry_after == T0 + 120
        assert (await fetch(p, f"http://127.0.0.1:{victim.port}/article/1"))["success"]
        with pytest.raises(HostWait) as wait:
            await fetch(p, f"http://127.0.0.2:{other.port}/article/1")
        assert wait.value.retry_after == T0 + 120
    finally:
        await p.close()
        p.store.close()


async def test_retry_after_as_an_http_date_is_honoured(env):
    p = await env.pipeline()
    when = "Sun, 17 Mar 2030 17:48:20 GMT"  # T0 + 100 s
    with pytest.raises(Upstream5xx) as err:
        await fetch(p, f"{env.base}/retry-after/503?after={when}")
    assert err.value.envelope()["retry_after"] == "2030-03-17T17:48:20Z"
    assert err.value.retry_after == T0 + 100


async def test_retry_after_is_capped_by_retry_after_max(env):
    p = await env.pipeline(retry_after_max="60s")
    with pytest.raises(Upstream4xx) as err:
        await fetch(p, f"{env.base}/retry-after/429?after=86400")
    assert err.value.retry_after == T0 + 60


async def test_a_5xx_without_retry_after_is_retryable_with_no_time(env):
    p = await env.pipeline()
    with pytest.raises(Upstream5xx) as err:
        await fetch(p, f"{env.base}/status/502")
    body = err.value.envelope()
    assert body["retryable"] is True and body["retry_after"] is None
    assert (await fetch(p, f"{env.base}/article/1"))["success"]  # no wait was recorded


async def test_a_timeout_is_retryable(env):
    p = await env.pipeline(timeout=0.3)
    with pytest.raises(Timeout) as err:
        await fetch(p, f"{env.base}/slow?s=2", background=False)
    assert err.value.envelope()["retryable"] is True
