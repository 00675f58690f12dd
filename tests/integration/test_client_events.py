"""The clients' event streams over real HTTP on loopback (docs/CLIENT.md §Events, docs/BATCH.md
§Follow the events): `AsyncClient.events` and `Client.events` resume after a dropped
connection with no event missed or repeated, and `sift batch events` prints NDJSON and exits
with the job's exit code. A loopback relay between client and API stands for the network, so
a test can cut every open connection; a second store stands for the worker."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from sift import config
from sift.api.app import create_app
from sift.auth import add_key
from sift.cli import exits
from sift.cli.main import main
from sift.client import AsyncClient, Client, NotFound
from sift.client.calls import Call
from sift.signing import rotate_secret
from sift.store import open_store


class Relay:
    """Forwards loopback TCP to the API; `cut()` drops every connection open now."""

    def __init__(self, port: int):
        self.port = port
        self.pipes: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader, writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.pipes += [writer, up_writer]

        async def pump(src, dst):
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def cut(self) -> None:
        for w in self.pipes:
            w.transport.abort()
        self.pipes.clear()

    async def close(self) -> None:
        self.cut()
        self.server.close()


@pytest.fixture
async def env(aiohttp_server, state_dir, monkeypatch):
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [8080]},
            "server": {"event_heartbeat": 0.2},
        }
    )
    key = add_key(cfg.keys_file, "alice")
    server = await aiohttp_server(create_app(cfg), host="127.0.0.1")
    relay = Relay(server.port)
    url = f"http://127.0.0.1:{await relay.start()}"
    monkeypatch.setenv("SIFT_URL", url)
    monkeypatch.setenv("SIFT_KEY", key)
    worker = open_store(cfg)

    class Env:
        async def submit(self, n):
            async with AsyncClient() as sift:
                urls = [f"http://127.0.0.1:8080/{i}" for i in range(n)]
                return (await sift.batch_submit(urls, fresh=True))["job_id"]

        async def work(self, job_id, status="done"):
            now = time.time()
            claim = await worker.batch.claim(job_id, now)
            failed = status == "failed"
            await worker.batch.finish(
                job_id, claim.idx, status=status, outcome="upstream_5xx" if failed else "ok",
                seconds=0.1, now=now, result=None if failed else '{"success": true}',
                error="boom" if failed else None,
            )  # fmt: skip

    e = Env()
    e.relay, e.cfg = relay, cfg
    yield e
    await relay.close()
    await worker.aclose()


async def test_the_async_client_resumes_a_dropped_stream_with_no_event_missed_or_repeated(env):
    job = await env.submit(4)
    await env.work(job)
    seen = []
    async with AsyncClient() as sift:
        stream = sift.events(job, reconnect_wait=0.05)
        seen += [await anext(stream), await anext(stream)]
        env.relay.cut()  # the connection drops between events
        await env.work(job)
        await env.work(job, "failed")
        seen.append(await anext(stream))
        env.relay.cut()
        await env.work(job)
        seen += [event async for event in stream]
    assert [e["data"]["event_id"] for e in seen] == [1, 2, 3, 4, 5, 6]
    assert [e["type"] for e in seen][-2:] == ["target.done", "job.partial"]


async def test_the_sync_client_follows_a_job_to_its_end(env):
    job = await env.submit(2)

    def follow():
        with Client() as sift:
            return list(sift.events(job, results=True, reconnect_wait=0.05))

    reading = asyncio.create_task(asyncio.to_thread(follow))
    await asyncio.sleep(0.3)
    await env.work(job)
    env.relay.cut()
    await env.work(job)
    events = await asyncio.wait_for(reading, 20)
    assert [e["type"] for e in events] == ["job.running", "target.done", "target.done", "job.done"]
    assert events[1]["data"]["result"] == {"success": True}


async def test_an_unknown_jobs_events_raise_not_found(env):
    async with AsyncClient() as sift:
        with pytest.raises(NotFound):
            await anext(sift.events("0" * 32))


async def test_sift_batch_events_prints_ndjson_and_exits_with_the_jobs_code(env, capsys):
    job = await env.submit(2)
    await env.work(job)
    await env.work(job, "failed")
    code = await asyncio.to_thread(main, ["batch", "events", job])
    lines = capsys.readouterr().out.splitlines()
    assert code == exits.PARTIAL
    assert [json.loads(line)["type"] for line in lines] == [
        "job.running", "target.done", "target.failed", "job.partial",
    ]  # fmt: skip


async def test_sift_batch_submit_webhook_gives_the_job_a_webhook(env, capsys, tmp_path):
    rotate_secret(env.cfg.keys_file, "alice")
    targets = tmp_path / "t.txt"
    targets.write_text("http://127.0.0.1:8080/a\n")
    hook = "http://127.0.0.1:8080/hook"
    code = await asyncio.to_thread(main, ["batch", "submit", str(targets), "--webhook", hook])
    assert code == exits.OK
    job = json.loads(capsys.readouterr().out)["job_id"]
    async with AsyncClient() as sift:
        answer = await sift.send(Call("POST", f"/v1/batch/{job}/webhook/redeliver", ok=(202,)))
    assert answer == {"success": True, "redelivering": 0}  # it has a webhook, nothing sent yet
