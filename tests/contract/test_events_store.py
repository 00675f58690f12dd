"""The job event log's rules (docs/API.md §Events), on both engines: each event is written with
the change it records, ids increase within the job, the log is bounded by the job's targets
and goes with the job, restricted callers' events carry nothing their logs may not, and a
job's events say what its status says."""

from __future__ import annotations

import orjson

from sift.batch.wire import status_body
from sift.log import REDACTED_FOR_RESTRICTED
from sift.store.event_rules import max_events
from tests.storekit import TTL
from tests.storekit import submit as _submit

T0 = 1_700_000_000.0


async def _finish(batch, job_id, idx, now, status="done", **kw):
    kw.setdefault("result", '{"success": true}' if status == "done" else None)
    if status == "failed":
        kw.setdefault("error", "upstream returned 503")
        kw.setdefault("hint", "retry later")
        kw.setdefault("retryable", True)
        kw.setdefault("retry_after", T0 + 600)
    return await batch.finish(
        job_id, idx, status=status, outcome="ok" if status == "done" else "upstream_5xx",
        seconds=0.5, now=now, **kw,
    )  # fmt: skip


async def _run(batch, job_id, now, statuses):
    for status in statuses:
        claim = await batch.claim(job_id, now)
        await _finish(batch, job_id, claim.idx, now, status)


async def _events(engine, job_id, after=0, results=False):
    got = await engine.store.events.read(job_id, after=after, results=results)
    return [] if got is None else got[1]


def _entry(event) -> dict:
    data = orjson.loads(event.data)
    if event.url is not None:
        data["url"] = event.url
    return data


async def test_a_jobs_events_equal_what_its_status_reports(engine):
    await _submit(engine.batch, "j1", T0, n=3)
    await _run(engine.batch, "j1", T0 + 1, ["done", "failed", "done"])
    events = await _events(engine, "j1")
    job, targets = await engine.batch.status("j1", results=False)
    body = orjson.loads(orjson.dumps(status_body(job, targets, results=False)))
    assert [e.kind for e in events] == [
        "job.running", "target.done", "target.failed", "target.done", "job.partial",
    ]  # fmt: skip
    said = [_entry(e) for e in events if e.kind.startswith("target.")]
    assert [{k: v for k, v in d.items() if k != "outcome"} for d in said] == body["targets"]
    assert [d["outcome"] for d in said] == ["ok", "upstream_5xx", "ok"]
    end = orjson.loads(events[-1].data)
    assert end == {k: body[k] for k in end}
    assert set(end) == {"status", "error", "targets_total", "targets_done", "targets_failed"}


async def test_event_ids_increase_within_the_job_and_are_bounded_by_its_targets(engine):
    await _submit(engine.batch, "j1", T0, n=2)
    await _submit(engine.batch, "j2", T0, n=1)
    await _run(engine.batch, "j1", T0 + 1, ["done"])
    await _run(engine.batch, "j2", T0 + 1, ["failed"])
    await _run(engine.batch, "j1", T0 + 2, ["done"])
    for job_id, n in (("j1", 2), ("j2", 1)):
        ids = [e.id for e in await _events(engine, job_id)]
        assert ids == list(range(1, max_events(n) + 1))
    assert [e.id for e in await _events(engine, "j1", after=2)] == [3, 4]


async def test_each_event_is_stored_by_the_transaction_of_its_change(engine):
    await _submit(engine.batch, "j1", T0, n=2)
    assert await _events(engine, "j1") == []  # a queued job has said nothing yet
    claim = await engine.batch.claim("j1", T0 + 1)
    assert [e.kind for e in await _events(engine, "j1")] == ["job.running"]
    await _finish(engine.batch, "j1", claim.idx, T0 + 2)
    assert [e.kind for e in await _events(engine, "j1")][-1] == "target.done"
    again = await _finish(engine.batch, "j1", claim.idx, T0 + 3)  # not running: not stored
    assert not again.stored
    assert len(await _events(engine, "j1")) == 2
    assert (await _events(engine, "j1"))[-1].at == T0 + 2


async def test_a_jobs_events_are_deleted_with_the_job(engine):
    await _submit(engine.batch, "j1", T0, n=1)
    await _run(engine.batch, "j1", T0 + 1, ["done"])
    assert len(await _events(engine, "j1")) == 3
    assert await engine.batch.sweep(T0 + 1 + TTL, TTL) == 1
    assert await engine.store.events.read("j1") is None


async def test_a_cancel_is_the_jobs_last_event_and_the_target_in_flight_is_not_announced(engine):
    await _submit(engine.batch, "j1", T0, n=3)
    await _run(engine.batch, "j1", T0 + 1, ["done"])
    claim = await engine.batch.claim("j1", T0 + 2)
    await engine.batch.cancel("j1", T0 + 3)
    await _finish(engine.batch, "j1", claim.idx, T0 + 4)  # stored, shown by status
    events = await _events(engine, "j1")
    assert [e.kind for e in events] == ["job.running", "target.done", "job.cancelled"]
    assert orjson.loads(events[-1].data)["targets_done"] == 1
    _, targets = await engine.batch.status("j1")
    assert [t.status for t in targets] == ["done", "done", "pending"]


async def test_a_restricted_callers_events_carry_nothing_its_logs_may_not(engine):
    await _submit(engine.batch, "r1", T0, n=2, caller_class="restricted")
    await _run(engine.batch, "r1", T0 + 1, ["done", "failed"])
    events = await _events(engine, "r1", results=True)
    assert [e.kind for e in events][-1] == "job.partial"
    for event in events:
        assert event.url is None
        assert not set(orjson.loads(event.data)) & REDACTED_FOR_RESTRICTED
    failed = orjson.loads(events[2].data)
    assert (failed["status"], failed["retryable"], failed["outcome"]) == (
        "failed", True, "upstream_5xx",
    )  # fmt: skip


async def test_a_targets_event_carries_its_results_verdict_and_the_result_only_when_asked(
    engine,
):
    await _submit(engine.batch, "j1", T0, n=1)
    claim = await engine.batch.claim("j1", T0 + 1)
    result = '{"success": true, "verdict": {"answer": "yes"}, "content": "x"}'
    await _finish(engine.batch, "j1", claim.idx, T0 + 2, result=result)
    plain = (await _events(engine, "j1"))[1]
    assert orjson.loads(plain.data)["verdict"] == {"answer": "yes"}
    assert plain.result is None
    assert (await _events(engine, "j1", results=True))[1].result == result


async def test_a_restart_ends_the_log_of_every_job_it_fails(engine):
    """SQLite fails the running job (`job.failed`, error `restart`); PostgreSQL fails the lost
    target, then the job ends as its targets say (docs/WORKER.md §Several workers)."""
    await _submit(engine.batch, "j1", T0, n=1)
    await engine.batch.claim("j1", T0 + 1)
    await engine.batch.restart(T0 + 1000)
    events = await _events(engine, "j1")
    job = await engine.batch.job("j1")
    assert events[-1].kind == f"job.{job.status}" == "job.failed"
    assert orjson.loads(events[-1].data)["status"] == "failed"
