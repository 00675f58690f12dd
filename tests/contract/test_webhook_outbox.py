"""The webhook outbox's rules (docs/API.md §Webhooks), on both engines: a delivery is added
with the event it carries, only for the kinds the webhook asked for; a taken delivery is
leased; each answer moves it as the rules say, counted once; redeliver sends again."""

from __future__ import annotations

import random

from sift.store import webhook_rules as rules
from sift.store.series import WEBHOOK_DELIVERIES
from tests.storekit import ROOMY, TTL, targets

T0 = 1_700_000_000.0
URL = "http://127.0.0.1:9/hook"


async def _submit(engine, job_id, n=2, events=None, webhook=True):
    return await engine.batch.submit(
        job_id=job_id, caller="alice", caller_class="fleet", idem_key=f"k-{job_id}",
        targets=targets(n), now=T0, ttl=TTL, **ROOMY,
        webhook=(URL, rules.expand(events), False) if webhook else None,
    )  # fmt: skip


async def _run(engine, job_id, now, n):
    for _ in range(n):
        claim = await engine.batch.claim(job_id, now)
        await engine.batch.finish(
            job_id, claim.idx, status="done", outcome="ok", seconds=0.1, now=now, result="{}"
        )


async def test_a_webhook_gets_its_jobs_terminal_event_only_by_default(engine):
    await _submit(engine, "j1")
    await _run(engine, "j1", T0 + 1, 2)
    taken = await engine.store.webhooks.take(T0 + 2)
    assert [(d.job_id, d.event_id, d.kind, d.url) for d in taken] == [("j1", 4, "job.done", URL)]
    assert (taken[0].caller, taken[0].caller_class, taken[0].attempts) == ("alice", "fleet", 0)


async def test_target_events_are_delivered_on_request_and_a_job_without_webhook_has_none(
    engine,
):
    await _submit(engine, "j1", events=["target.*"])
    await _submit(engine, "j2", webhook=False)
    await _run(engine, "j1", T0 + 1, 2)
    await _run(engine, "j2", T0 + 1, 2)
    taken = await engine.store.webhooks.take(T0 + 2)
    assert [(d.job_id, d.kind) for d in taken] == [("j1", "target.done")] * 2
    assert await engine.store.webhooks.state("j2") is None


async def test_a_taken_delivery_is_leased_and_due_again_when_its_sender_died(engine):
    await _submit(engine, "j1", n=1)
    await _run(engine, "j1", T0 + 1, 1)
    assert len(await engine.store.webhooks.take(T0 + 2, lease=60)) == 1
    assert await engine.store.webhooks.take(T0 + 3) == []  # another sender skips it
    again = await engine.store.webhooks.take(T0 + 63)
    assert [d.event_id for d in again] == [3]


async def test_answers_move_a_delivery_as_the_rules_say_and_are_counted_once_each(engine):
    await _submit(engine, "j1", n=1)
    await _run(engine, "j1", T0 + 1, 1)
    hooks = engine.store.webhooks
    (d,) = await hooks.take(T0 + 2)
    retry_at = rules.next_try(1, T0 + 2, rng=random.Random(1))
    assert await hooks.record("j1", d.event_id, status=503, outcome="retry", retry_at=retry_at)
    assert await hooks.state("j1") == {
        "state": "pending", "attempts": 1, "last_status": 503, "next_try": retry_at,
        "deliveries": 1,
    }  # fmt: skip
    assert await hooks.take(T0 + 3) == []
    (d,) = await hooks.take(retry_at)
    assert d.attempts == 1
    assert await hooks.record("j1", d.event_id, status=200, outcome="delivered", retry_at=None)
    assert not await hooks.record("j1", d.event_id, status=200, outcome="delivered", retry_at=None)
    state = await hooks.state("j1")
    assert (state["state"], state["attempts"], state["next_try"]) == ("delivered", 2, None)
    assert await engine.counter(WEBHOOK_DELIVERIES, "retry") == 1
    assert await engine.counter(WEBHOOK_DELIVERIES, "delivered") == 1


async def test_a_410_stops_and_redeliver_sends_it_again_with_the_same_id(engine):
    await _submit(engine, "j1", n=1)
    await _run(engine, "j1", T0 + 1, 1)
    hooks = engine.store.webhooks
    (d,) = await hooks.take(T0 + 2)
    await hooks.record("j1", d.event_id, status=410, outcome="gone", retry_at=None)
    assert (await hooks.state("j1"))["state"] == "failed"
    assert await hooks.take(T0 + 5000) == []
    assert await hooks.redeliver("j1", T0 + 10) == 1
    (again,) = await hooks.take(T0 + 10)
    assert (again.event_id, again.attempts) == (d.event_id, 0)
    assert await hooks.redeliver("nope", T0) is None


async def test_the_last_try_that_fails_ends_the_delivery_failed(engine):
    await _submit(engine, "j1", n=1)
    await _run(engine, "j1", T0 + 1, 1)
    hooks = engine.store.webhooks
    now = T0 + 2
    for attempt in range(1, rules.TRIES + 1):
        (d,) = await hooks.take(now)
        assert d.attempts == attempt - 1
        retry_at = rules.next_try(attempt, now)
        await hooks.record("j1", d.event_id, status=500, outcome="retry", retry_at=retry_at)
        if retry_at is None:
            break
        now = retry_at
    assert attempt == rules.TRIES
    assert (await hooks.state("j1"))["state"] == "failed"
    assert await engine.counter(WEBHOOK_DELIVERIES, "failed") == 1


async def test_deliveries_are_deleted_with_the_job(engine):
    await _submit(engine, "j1", n=1)
    await _run(engine, "j1", T0 + 1, 1)
    await engine.batch.sweep(T0 + 1 + TTL, TTL)
    assert await engine.store.webhooks.take(T0 + 1 + TTL) == []
    assert await engine.store.webhooks.next_due() is None


async def test_a_delivery_carries_a_done_targets_result_only_when_asked_and_within_the_bound(
    engine,
):
    small, large = '{"success": true}', '{"content": "' + "x" * rules.RESULT_MAX + '"}'
    for job_id, results in (("asked", True), ("plain", False)):
        await engine.batch.submit(
            job_id=job_id, caller="alice", caller_class="fleet", idem_key=f"k-{job_id}",
            targets=targets(2), now=T0, ttl=TTL, **ROOMY,
            webhook=(URL, rules.expand(["target.*"]), results),
        )  # fmt: skip
        for result in (small, large):
            claim = await engine.batch.claim(job_id, T0 + 1)
            await engine.batch.finish(
                job_id, claim.idx, status="done", outcome="ok", seconds=0.1, now=T0 + 1,
                result=result,
            )  # fmt: skip
    taken = {(d.job_id, d.event_id): d for d in await engine.store.webhooks.take(T0 + 2)}
    assert (taken[("asked", 2)].result, taken[("asked", 2)].result_bytes) == (small, len(small))
    assert (taken[("asked", 3)].result, taken[("asked", 3)].result_bytes) == (None, len(large))
    assert all(taken[("plain", i)].result is None for i in (2, 3))
    assert all(taken[("plain", i)].result_bytes == 0 for i in (2, 3))
