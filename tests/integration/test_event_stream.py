"""`GET /v1/batch/{job_id}/events` over real HTTP on loopback, on both engines (docs/API.md
§GET /v1/batch/{job_id}/events). The API app serves the stream; a second store on the same
database stands for the worker and stores targets, so every event reaches the stream through
the database, as in production."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from sift import config
from sift.api.app import create_app
from sift.api.appkeys import STORE
from sift.auth import add_key, revoke_key
from sift.store import open_store


class Stream:
    """An SSE reader: frames as dicts (`id`, `event`, `data`), comments counted."""

    def __init__(self, resp):
        self.resp = resp
        self.comments = 0

    async def frame(self, timeout: float = 10.0) -> dict | None:
        """The next frame, or None at the end of the stream."""
        fields: dict = {}
        async with asyncio.timeout(timeout):
            while True:
                line = await self.resp.content.readline()
                if not line:
                    return fields or None
                line = line.decode().rstrip("\n")
                if not line:
                    if fields:
                        fields["data"] = orjson.loads(fields["data"])
                        return fields
                    continue
                if line.startswith(":"):
                    self.comments += 1
                    continue
                name, _, value = line.partition(": ")
                fields[name] = fields.get(name, "") + value if name == "data" else value

    async def rest(self) -> list[dict]:
        frames = []
        while (f := await self.frame()) is not None:
            frames.append(f)
        return frames


@pytest.fixture(params=["sqlite", "postgres"])
async def env(request, aiohttp_client, state_dir, monkeypatch):
    monkeypatch.delenv("SIFT_DATABASE_URL", raising=False)
    store_cfg: dict = {"state_dir": str(state_dir)}
    if request.param == "postgres":
        store_cfg.update(engine="postgres", dsn=request.getfixturevalue("pg_dsn"))
    cfg = config.from_dict(
        {
            "store": store_cfg,
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [80, 8080]},
            "server": {"event_heartbeat": getattr(request, "heartbeat", 0.2)},
        }
    )
    keys = {n: add_key(cfg.keys_file, n) for n in ("alice", "bob")}
    keys["rita"] = add_key(cfg.keys_file, "rita", restricted=True)
    client = await aiohttp_client(create_app(cfg))
    worker = open_store(cfg)

    class Env:
        async def submit(self, n, who="alice"):
            urls = [{"url": f"http://127.0.0.1:8080/p/{i}"} for i in range(n)]
            resp = await client.post("/v1/batch", json={"targets": urls}, headers=self.auth(who))
            assert resp.status == 202, await resp.text()
            return (await resp.json())["job_id"]

        def auth(self, who="alice"):
            return {"Authorization": f"Bearer {keys[who]}"}

        async def open(self, job_id, who="alice", last=None, query=""):
            headers = self.auth(who)
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            resp = await client.get(f"/v1/batch/{job_id}/events{query}", headers=headers)
            return resp

        async def stream(self, job_id, **kw) -> Stream:
            resp = await self.open(job_id, **kw)
            assert resp.status == 200, await resp.text()
            assert resp.headers["Content-Type"] == "text/event-stream"
            return Stream(resp)

        async def work(self, job_id, status="done"):
            """The worker takes the job's next target and stores it."""
            now = time.time()
            claim = await worker.batch.claim(job_id, now)
            assert claim is not None
            failed = status == "failed"
            await worker.batch.finish(
                job_id, claim.idx, status=status, outcome="upstream_5xx" if failed else "ok",
                seconds=0.1, now=now, result=None if failed else '{"success": true, "n": 1}',
                error="upstream returned 503" if failed else None, hint="retry" if failed else None,
            )  # fmt: skip

    e = Env()
    e.client, e.cfg, e.worker = client, cfg, worker
    yield e
    await worker.aclose()


async def test_the_stream_replays_then_follows_live_events_and_ends_after_the_terminal_one(env):
    job = await env.submit(3)
    await env.work(job)
    stream = await env.stream(job)
    first = [await stream.frame(), await stream.frame()]
    assert [f["event"] for f in first] == ["job.running", "target.done"]
    await env.work(job, "failed")
    live = await stream.frame()
    assert (live["id"], live["event"]) == ("3", "target.failed")
    assert live["data"]["data"]["error"] == "upstream returned 503"
    await env.work(job)
    rest = await stream.rest()
    assert [f["event"] for f in rest] == ["target.done", "job.partial"]
    assert [int(f["id"]) for f in [*first, live, *rest]] == [1, 2, 3, 4, 5]
    end = rest[-1]["data"]
    assert end["type"] == "job.partial" and end["data"]["targets_failed"] == 1


async def test_a_dropped_stream_resumes_after_last_event_id_with_no_event_missed_or_repeated(
    env,
):
    job = await env.submit(4)
    await env.work(job)
    stream = await env.stream(job)
    seen = [await stream.frame(), await stream.frame()]
    stream.resp.close()  # the connection drops
    await env.work(job)
    await env.work(job, "failed")
    again = await env.stream(job, last=seen[-1]["id"])
    seen.append(await again.frame())
    await env.work(job)
    seen += await again.rest()
    assert [int(f["id"]) for f in seen] == list(range(1, 7))
    assert [f["event"] for f in seen] == [
        "job.running", "target.done", "target.done", "target.failed", "target.done",
        "job.partial",
    ]  # fmt: skip
    status = await (await env.client.get(f"/v1/batch/{job}", headers=env.auth())).json()
    said = [f["data"]["data"] for f in seen if f["event"].startswith("target.")]
    assert [d["status"] for d in said] == [t["status"] for t in status["targets"]]
    assert [d["url"] for d in said] == [t["url"] for t in status["targets"]]


async def test_a_stream_of_an_ended_job_replays_and_ends_and_resuming_past_its_end_ends(env):
    job = await env.submit(1)
    await env.work(job)
    frames = await (await env.stream(job)).rest()
    assert [f["event"] for f in frames] == ["job.running", "target.done", "job.done"]
    assert await (await env.stream(job, last=3)).rest() == []
    assert [f["id"] for f in await (await env.stream(job, query="?after=2")).rest()] == ["3"]


async def test_another_callers_stream_is_the_same_404_as_a_status_read(env):
    job = await env.submit(1)
    theirs = await env.open(job, who="bob")
    unknown = await env.open("0" * 32)
    status = await env.client.get(f"/v1/batch/{job}", headers=env.auth("bob"))
    assert theirs.status == unknown.status == status.status == 404
    assert await theirs.json() == await unknown.json() == await status.json()


async def test_a_quiet_stream_sends_a_heartbeat_comment_every_interval(env):
    job = await env.submit(2)
    await env.work(job)
    stream = await env.stream(job)
    await stream.frame()
    await stream.frame()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await stream.frame(timeout=1.0)
    assert 3 <= stream.comments <= 1.0 / env.cfg.server.event_heartbeat + 1
    assert time.monotonic() - started >= 1.0


async def test_a_revoked_keys_stream_ends(env):
    job = await env.submit(2)
    stream = await env.stream(job)
    revoke_key(env.cfg.keys_file, "alice")
    assert await stream.frame(timeout=5) is None  # ended within a heartbeat, no event sent


async def test_results_true_puts_each_targets_result_in_its_event(env):
    job = await env.submit(2)
    await env.work(job)
    await env.work(job, "failed")
    plain = await (await env.stream(job)).rest()
    full = await (await env.stream(job, query="?results=true")).rest()
    assert "result" not in plain[1]["data"]["data"]
    assert full[1]["data"]["data"]["result"] == {"success": True, "n": 1}
    assert "result" not in full[2]["data"]["data"]  # a failed target has none


async def test_a_restricted_callers_stream_carries_no_url_error_or_hint(env):
    job = await env.submit(2, who="rita")
    await env.work(job)
    await env.work(job, "failed")
    frames = await (await env.stream(job, who="rita")).rest()
    for frame in frames:
        assert not {"url", "error", "hint"} & set(frame["data"]["data"])


async def test_a_bad_last_event_id_or_query_is_400(env):
    job = await env.submit(1)
    for kw in ({"last": "x"}, {"last": "-1"}, {"query": "?results=maybe"}, {"query": "?wait=1"}):
        resp = await env.open(job, **kw)
        assert resp.status == 400, kw
        assert (await resp.json())["success"] is False


async def test_the_streams_of_one_job_share_one_read_of_its_new_events(env, monkeypatch):
    job = await env.submit(2)
    await env.work(job)
    streams = [await env.stream(job) for _ in range(8)]
    for s in streams:
        assert [(await s.frame())["id"], (await s.frame())["id"]] == ["1", "2"]
    store = env.client.app[STORE]
    reads: list[int] = []
    real = store.events.read

    async def counted(job_id, *, after=0, results=False):
        reads.append(after)
        return await real(job_id, after=after, results=results)

    monkeypatch.setattr(store.events, "read", counted)
    await asyncio.sleep(0.3)  # every stream is waiting again
    reads.clear()
    await env.work(job)
    for s in streams:
        assert (await s.frame())["id"] == "3"
    assert reads.count(2) <= 2  # one shared read (two if a stream woke a tick later), not 8


async def test_a_long_poll_is_not_woken_by_another_jobs_events(env, monkeypatch):
    """docs/ARCHITECTURE.md §Wake-ups: on PostgreSQL a job's events wake only that job's
    streams, so another job's long-poll neither returns nor re-reads its status."""
    store = env.client.app[STORE]
    reads = []
    terminal_among = store.batch.terminal_among

    async def counted(ids):
        reads.append(list(ids))
        return await terminal_among(ids)

    monkeypatch.setattr(store.batch, "terminal_among", counted)
    polled, other = await env.submit(1), await env.submit(6, who="bob")
    poll = asyncio.create_task(
        env.client.get(f"/v1/batch/{polled}?wait=20&results=false", headers=env.auth())
    )
    await asyncio.sleep(0.5)  # held, and the store's listener is in place
    before = len(reads)
    for _ in range(5):
        await env.work(other)
    await asyncio.sleep(0.5)
    assert not poll.done()  # five events and a claim of another job: still held
    if env.cfg.store.engine == "postgres":
        assert len(reads) == before  # and its status was not re-read for them
    t0 = time.monotonic()
    await env.work(polled)
    resp = await asyncio.wait_for(poll, 10)
    assert (await resp.json())["status"] == "done"
    assert time.monotonic() - t0 < 5  # woken by its own job's end, not the 20 s timeout


async def test_after_the_listener_reconnects_a_long_poll_whose_job_ended_meanwhile_wakes(env):
    """docs/ARCHITECTURE.md §Wake-ups: a notification sent while the API's listening
    connection was down is lost, so after the reconnect the long-polled statuses are read."""
    if env.cfg.store.engine != "postgres":
        pytest.skip("SQLite has no listening connection: the watcher reads data_version")
    import psycopg

    job = await env.submit(1)
    poll = asyncio.create_task(
        env.client.get(f"/v1/batch/{job}?wait=20&results=false", headers=env.auth())
    )
    await asyncio.sleep(0.5)  # held, and the listener is in place
    async with await psycopg.AsyncConnection.connect(env.cfg.store.dsn, autocommit=True) as db:
        find = "select pid from pg_stat_activity where query like 'listen %%' and pid <> %s"
        me = (await (await db.execute("select pg_backend_pid()")).fetchone())[0]
        pids = [r[0] for r in await (await db.execute(find, (me,))).fetchall()]
        assert pids
        for pid in pids:
            await db.execute("select pg_terminate_backend(%s)", (pid,))
        while await (
            await db.execute("select 1 from pg_stat_activity where pid = any(%s)", (pids,))
        ).fetchone():
            await asyncio.sleep(0.005)
    t0 = time.monotonic()
    await env.work(job)  # its notification has no listener to reach
    resp = await asyncio.wait_for(poll, 15)
    assert (await resp.json())["status"] == "done"
    assert time.monotonic() - t0 < 8  # woken by the re-read, not the 20 s timeout
