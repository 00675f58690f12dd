"""The worker's drain and its real pipeline share one `Gates`, so the slots the drain takes when
it admits a target are the ones the pipeline's acquire adopts (docs/WORKER.md §The scheduler):
a real site over loopback, a real database file, real gate files."""

from __future__ import annotations

import asyncio
import fcntl
import time
from types import SimpleNamespace

from sift import config
from sift.auth import Caller
from sift.batch import submit
from sift.gates import Gates, slots
from sift.store import Claim, open_store
from tests.dbview import view
from tests.integration.test_runner_drain import running, until_terminal
from tests.site import make_site
from worker.fetcher import open_fetch
from worker.fetches import Fetches


async def test_a_target_drained_through_the_pipeline_takes_its_gate_slots_once(
    aiohttp_server, state_dir, monkeypatch
):
    site = await aiohttp_server(make_site())
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
            "batch": {"drain_tasks": 1},
        }
    )
    store = open_store(cfg)
    gates = Gates.from_config(cfg.state_dir, cfg.gates)
    calls = []
    real = slots.fcntl.flock

    def counted(fd, op):
        calls.append(op)
        return real(fd, op)

    targets = [{"url": f"http://127.0.0.1:{site.port}/article/{n}"} for n in range(4)]
    try:
        async with open_fetch(cfg, store, gates) as fetch:
            monkeypatch.setattr(
                slots, "fcntl", SimpleNamespace(**{**vars(fcntl), "flock": counted})
            )
            sub = await submit(store, cfg.batch, Caller("alice"), targets, now=time.time())
            async with running(store, cfg, fetch, gates=gates):
                await until_terminal(store, sub.job_id, timeout=60)
        assert view(store).job(sub.job_id).status == "done"
        # One take per target (caller 1, host and global 1 + the reserve's probe, 2 each) and
        # its release (3): 10; a second slot table in the pipeline made it 20.
        assert len(calls) == 10 * len(targets), len(calls)
    finally:
        gates.close()
        store.close()


async def test_slots_handed_to_a_fetch_cancelled_before_it_starts_are_given_back(state_dir):
    """Past the grace period a fetch is cancelled before its first step, so its task never
    releases what its admission took (docs/WORKER.md §Shutdown and supervision)."""
    cfg = config.from_dict({"store": {"state_dir": str(state_dir)}})
    gates = Gates.from_config(cfg.state_dir, cfg.gates)
    fetches = Fetches(lambda claim: asyncio.sleep(0), cfg.batch)
    fetches.cancelling = True
    permit = gates.acquire("alice", "127.0.0.1", background=True)
    claim = Claim("j", 0, "http://127.0.0.1:9/a", "{}", "alice", "user", None)
    task = fetches.start(claim, permit)
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and permit.released
    assert gates.in_use() == {"global": 0, "host": 0, "caller": 0}
    gates.close()
