"""What the store records about waiting targets (docs/API.md §Waiting targets), on both
engines: the reason a target was put back with, the batch fetches in flight on every job, the
live jobs, and each host's not-before time with its cause."""

from __future__ import annotations

from tests.storekit import submit as _submit

T0 = 1_700_000_000.0


async def test_a_put_back_target_keeps_its_reason_and_retry_time(engine):
    await _submit(engine.batch, "j1", T0, n=2)
    await engine.batch.claim("j1", T0)
    await engine.batch.requeue("j1", 0, retry_at=T0 + 5, busy_since=T0, now=T0, reason="host_busy")
    facts = await engine.store.waits.facts("j1", T0 + 1)
    assert facts.pending == {0: (T0 + 5, "host_busy"), 1: (None, None)}
    assert (facts.running_urls, facts.live_jobs) == ([], 1)


async def test_the_fetches_in_flight_on_every_job_and_the_live_jobs_are_counted(engine):
    await _submit(engine.batch, "a", T0, n=1)
    await _submit(engine.batch, "b", T0, n=1, caller="bob", key="kb")
    claim = await engine.batch.claim("a", T0)
    facts = await engine.store.waits.facts("b", T0)
    assert (facts.running_urls, facts.live_jobs) == ([claim.url], 2)
    assert facts.pending == {0: (None, None)}


async def test_a_hosts_wait_says_crawl_delay_or_retry_after_and_the_later_one_wins(engine):
    p = engine.store.politeness
    assert await p.reserve("a.test", T0, 4.0) is None  # a Crawl-delay of 4 s
    await p.defer("b.test", T0 + 30, T0)  # a Retry-After
    await p.defer("b.test", T0 + 10, T0)  # an earlier one changes nothing
    facts = await engine.store.waits.facts("none", T0 + 1)
    assert facts.host_waits == {
        "a.test": (T0 + 4, "crawl_delay"),
        "b.test": (T0 + 30, "retry_after"),
    }
    await p.defer("a.test", T0 + 20, T0 + 1)  # the site now says Retry-After: 19 s
    facts = await engine.store.waits.facts("none", T0 + 5)
    assert facts.host_waits["a.test"] == (T0 + 20, "retry_after")
    assert (await engine.store.waits.facts("none", T0 + 31)).host_waits == {}
