"""The scheduler (docs/WORKER.md §The scheduler): first turns, skipping past full gates and
host waits, and waiting for a slot only when no job has one, on a real database file and real
gate files. The fetch is injected but takes its gate slots like the pipeline does.
"""

from __future__ import annotations

import asyncio
import fcntl
import string
import time
from types import SimpleNamespace

import pytest

from sift.auth import Caller
from sift.batch import submit
from sift.errors import HostWait
from sift.gates import Gates, slots
from sift.nudge import Nudger
from sift.store import Claim, open_store
from tests.dbview import view
from tests.integration.test_runner_drain import (
    BOB,
    Site,
    make_cfg,
    running,
    until,
    until_terminal,
)
from worker.listener import NudgeListener

CALLERS = [Caller(f"caller{j}") for j in range(8)]


@pytest.fixture
def make_store(state_dir):
    opened = []

    def make(**batch):
        cfg = make_cfg(state_dir, **batch)
        opened.append(open_store(cfg))
        return cfg, opened[-1]

    yield make
    for store in opened:
        store.close()


class GatedSite(Site):
    """A Site whose fetches hold real gate slots for their host, as batch fetches do."""

    def __init__(self, gates: Gates, delay: float):
        super().__init__(delay=delay)
        self.gates = gates

    async def __call__(self, claim: Claim) -> dict:
        host = claim.url.split("/")[2].split(":")[0]
        with self.gates.acquire(claim.caller, host, background=True):
            return await super().__call__(claim)


def gates_for(cfg) -> Gates:
    return Gates.from_config(cfg.state_dir, cfg.gates)


async def jobs_on(store, cfg, hosts: list[str], n: int, *, runner=None, run: str = "") -> list[str]:
    """One job per caller, job j on hosts[j], targets named `<letter><i>` (`run`: a path
    segment that keeps two runs' lists apart, so neither reuses the other's job)."""
    ids = []
    for j, host in enumerate(hosts):
        letter = string.ascii_lowercase[j]
        targets = [{"url": f"http://{host}:9/{run}/{letter}{i}"} for i in range(n)]
        nudge = runner.nudge if runner else None
        sub = await submit(store, cfg.batch, CALLERS[j], targets, now=time.time(), nudge=nudge)
        ids.append(sub.job_id)
    return ids


async def drain_seconds(make_store, workers: int, hosts: list[str], n: int) -> tuple[float, list]:
    cfg, store = make_store(drain_tasks=workers, jobs_per_caller=1)
    gates = gates_for(cfg)
    site = GatedSite(gates, delay=0.05)
    ids = await jobs_on(store, cfg, hosts, n, run=f"w{workers}")
    t0 = time.monotonic()
    async with running(store, cfg, site, gates=gates):
        await until_terminal(store, *ids, timeout=60)
    gates.close()
    assert all(view(store).job(j).status == "done" for j in ids)
    return time.monotonic() - t0, site.starts


def largest_lead(starts: list[str], n: int) -> int:
    served: dict[str, int] = {}
    lead = 0
    for name in starts:
        served[name[0]] = served.get(name[0], 0) + 1
        left = [c for c in served.values() if c < n]
        if left:
            lead = max(lead, max(served.values()) - min(left))
    return lead


# -- first turns -----------------------------------------------------------------------------


async def test_a_job_submitted_while_another_is_in_flight_takes_the_next_turn(make_store):
    cfg, store = make_store(drain_tasks=1)
    site = Site(delay=0.2)
    async with running(store, cfg, site) as runner:
        a = (await submit(store, cfg.batch, CALLERS[0], _t("a", 3), now=time.time())).job_id
        runner.nudge()
        await until(lambda: "a0" in site.starts)
        b = (await submit(store, cfg.batch, BOB, _t("b", 3), now=time.time())).job_id
        runner.nudge()
        await until_terminal(store, a, b)
    assert site.starts == ["a0", "b0", "a1", "b1", "a2", "b2"]


def _t(letter: str, n: int) -> list[dict]:
    return [{"url": f"http://127.0.0.1:9/{letter}{i}"} for i in range(n)]


# -- full gates never stall the drain --------------------------------------------------------


async def test_two_tasks_on_one_host_are_never_slower_than_one(make_store):
    hosts = ["127.0.0.1"] * 8
    one, _ = await drain_seconds(make_store, 1, hosts, 3)
    two, starts = await drain_seconds(make_store, 2, hosts, 3)
    assert two < one * 1.25, (one, two)
    assert largest_lead(starts, 3) <= 2, starts


async def test_two_tasks_on_two_hosts_drain_nearly_twice_as_fast(make_store):
    """Twice as fast as one host serves them in turn. One task is too: each job is another
    caller's, so a target yields its task at once to the next caller's ready job while the
    slow lane has a place (docs/WORKER.md §Handing off slow targets)."""
    hosts = ["127.0.0.1"] * 4 + ["localhost"] * 4  # a second task must skip past host one
    one, _ = await drain_seconds(make_store, 1, hosts, 3)
    two, starts = await drain_seconds(make_store, 2, hosts, 3)
    in_turn = len(hosts) * 3 * 0.05
    assert in_turn / two > 1.5 and in_turn / one > 1.5, (in_turn, one, two)
    assert largest_lead(starts, 3) <= 2, starts


async def test_a_target_keeps_its_task_from_a_job_whose_last_host_has_no_room(make_store):
    """The slow lane's move at once (docs/WORKER.md §Handing off slow targets) guesses a
    job's next host from its last one: callers sharing one host, which serves one batch fetch
    at a time, each wait for the target on it in turn and no target moves for nothing (each
    move cost a refused claim, a put-back and the chained claim). Only the first target may
    move, before any job's host is known."""
    cfg, store = make_store(drain_tasks=1, hand_off_after=5.0)
    gates = gates_for(cfg)
    site = GatedSite(gates, delay=0.03)
    ids = await jobs_on(store, cfg, ["127.0.0.1"] * 3, 4)
    moved: list = []
    async with running(store, cfg, site, gates=gates) as runner:
        handed_off = runner.state.handed_off
        runner.state.handed_off = lambda key: (moved.append(key), handed_off(key))[1]
        await until_terminal(store, *ids)
    gates.close()
    assert len(moved) <= 1, moved
    assert largest_lead(site.starts, 4) <= 2, site.starts


async def test_a_skipped_job_keeps_its_place_in_the_rotation(make_store):
    cfg, store = make_store(drain_tasks=1)
    gates = gates_for(cfg)
    other = gates_for(cfg)  # another process: its own slot table on the same files
    held = [other.acquire("someone", "127.0.0.1")]  # leaves batch no room on this host
    site = GatedSite(gates, delay=0.01)
    a, b = await jobs_on(store, cfg, ["127.0.0.1", "localhost"], 2)
    async with running(store, cfg, site, gates=gates):
        await until(lambda: site.starts[:2] == ["b0", "b1"])
        held[0].release()
        await until_terminal(store, a, b)
    assert site.starts == ["b0", "b1", "a0", "a1"]
    gates.close()
    other.close()


async def test_a_task_waiting_for_a_slot_wakes_when_another_process_frees_it(make_store):
    cfg, store = make_store(drain_tasks=1, poll_interval=5.0, retry_wait=5.0)
    gates, other = gates_for(cfg), gates_for(cfg)
    api_nudger = Nudger(cfg.state_dir)
    other.on_release = api_nudger.slot_freed  # as the API process wires its pipeline's gates
    permit = other.acquire("someone", "127.0.0.1")
    site = GatedSite(gates, delay=0.0)
    async with running(store, cfg, site, gates=gates) as runner:
        listener = NudgeListener(cfg.state_dir, runner.nudge, runner.slot_freed)
        listener.bind()
        runner.state.room.on_waiting = listener.waiting  # as worker/process.py wires it
        listen = asyncio.create_task(listener.run())
        await jobs_on(store, cfg, ["127.0.0.1"], 1, runner=runner)
        await asyncio.sleep(0.3)
        assert site.starts == []  # no room: the job waits
        freed = time.monotonic()
        permit.release()
        await until(lambda: site.starts == ["a0"])
        woke = time.monotonic() - freed
        listen.cancel()
        listener.close()
    assert woke < cfg.batch.poll_interval / 5, woke
    api_nudger.close()
    gates.close()
    other.close()


# -- host waits ------------------------------------------------------------------------------


class PacedSite(Site):
    """A site whose host `127.0.0.1` asks for `spacing` seconds between fetches (HostWait)."""

    def __init__(self, spacing: float):
        super().__init__()
        self.spacing = spacing
        self.next_at: dict[str, float] = {}

    async def __call__(self, claim: Claim) -> dict:
        host = claim.url.split("/")[2].split(":")[0]
        now = time.time()
        if host == "127.0.0.1":
            if self.next_at.get(host, 0) > now:
                raise HostWait(retry_after=self.next_at[host])
            self.next_at[host] = now + self.spacing
        return await super().__call__(claim)


async def test_while_a_host_must_wait_the_drain_serves_other_jobs(make_store):
    cfg, store = make_store(drain_tasks=1)
    site = PacedSite(spacing=0.5)
    a, b = await jobs_on(store, cfg, ["127.0.0.1", "localhost"], 3)
    async with running(store, cfg, site):
        await until_terminal(store, a, b)
    done_b = max(site.starts.index(f"b{i}") for i in range(3))
    assert done_b < site.starts.index("a2")  # b drained during a's waits
    assert [s for s in site.starts if s[0] == "a"] == ["a0", "a1", "a2"]
    assert site.calls["a1"] == 1  # a waiting host's job is skipped, not tried over and over


# -- one take of the gates per target --------------------------------------------------------


async def test_a_drained_target_takes_its_gate_slots_once_not_a_probe_then_a_take(
    make_store, monkeypatch
):
    """docs/GATES.md §Interactive fetches win: the admission's take is the fetch's permit."""
    calls = []
    real = slots.fcntl.flock

    def counted(fd, op):
        calls.append(op)
        return real(fd, op)

    monkeypatch.setattr(slots, "fcntl", SimpleNamespace(**{**vars(fcntl), "flock": counted}))
    cfg, store = make_store(drain_tasks=1)
    gates = gates_for(cfg)
    site = GatedSite(gates, delay=0.0)
    (job,) = await jobs_on(store, cfg, ["127.0.0.1"], 6)
    async with running(store, cfg, site, gates=gates):
        await until_terminal(store, job)
    assert site.starts == [f"a{i}" for i in range(6)]
    # Per target: caller 1, host 1 + the reserve's probe (take, give back), global the same,
    # then the three slots given back: 10 flock calls (a probe before the take made it 20).
    assert len(calls) / 6 == 10, len(calls)
    assert gates.in_use() == {"global": 0, "host": 0, "caller": 0}
    gates.close()


async def test_slots_taken_for_a_fetch_that_takes_no_gates_are_given_back(make_store):
    cfg, store = make_store(drain_tasks=1)
    gates = gates_for(cfg)
    seen = []
    site = Site()

    async def fetch(claim: Claim) -> dict:
        seen.append(dict(gates.in_use()))  # held through the fetch, as the pipeline's would be
        return await site(claim)

    (job,) = await jobs_on(store, cfg, ["127.0.0.1"], 3)
    async with running(store, cfg, fetch, gates=gates):
        await until_terminal(store, job)
    assert seen == [{"global": 1, "host": 1, "caller": 1}] * 3
    assert gates.in_use() == {"global": 0, "host": 0, "caller": 0}
    gates.close()


async def test_a_freed_slot_sends_the_worker_a_datagram_only_while_a_job_waits_for_one(
    make_store,
):
    """docs/WORKER.md §The scheduler: no wake-up of the worker after every `/v1/fetch`."""
    cfg, store = make_store(drain_tasks=1, poll_interval=5.0, retry_wait=5.0)
    gates, api = gates_for(cfg), gates_for(cfg)
    api_nudger = Nudger(cfg.state_dir)
    api.on_release = api_nudger.slot_freed
    heard = []
    site = GatedSite(gates, delay=0.0)
    async with running(store, cfg, site, gates=gates) as runner:

        def freed() -> None:
            heard.append("g")
            runner.slot_freed()

        listener = NudgeListener(cfg.state_dir, runner.nudge, freed)
        listener.bind()
        runner.state.room.on_waiting = listener.waiting
        listen = asyncio.create_task(listener.run())
        for _ in range(5):  # interactive fetches while no batch job waits
            api.acquire("someone", "127.0.0.1").release()
        await asyncio.sleep(0.2)
        assert heard == []
        permit = api.acquire("someone", "127.0.0.1")  # leaves batch no room on the host
        (job,) = await jobs_on(store, cfg, ["127.0.0.1"], 2, runner=runner)
        await until(lambda: runner.state.room.any_gated)
        permit.release()
        await until_terminal(store, job)
        assert heard == ["g"] and site.starts == ["a0", "a1"]
        for _ in range(5):  # nothing waits again
            api.acquire("someone", "127.0.0.1").release()
        await asyncio.sleep(0.2)
        assert heard == ["g"]
        listen.cancel()
        listener.close()
    api_nudger.close()
    gates.close()
    api.close()
