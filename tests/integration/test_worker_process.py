"""The worker process (docs/WORKER.md §Restart semantics, §Shutdown and supervision): real
`sift-worker` processes on a temp state dir.

Targets are not fetched here: the harness starts the real worker with a fetch of the tests' own
(`tests.sleepy_worker`) that sleeps S seconds and answers a small envelope. Jobs are submitted
through the same library the API uses, with the real nudge.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from sift import config
from sift.auth import Caller
from sift.batch import submit
from sift.nudge import Nudger
from sift.store import open_store
from tests import harness
from tests.dbview import view
from tests.site import HITS, make_site
from worker.heartbeat import beat_forever
from worker.process import EXIT_DIED, EXIT_OK, Worker

ALICE = Caller("alice")


def write_config(tmp_path: Path, state_dir: Path, **batch) -> Path:
    batch = {"poll_interval": 0.2, "jobs_per_caller": 8, **batch}
    return harness.write_config(tmp_path / "sift.toml", state_dir=state_dir, batch=batch)


class Procs:
    """Worker processes this test started; each is killed by its PID at teardown."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.started: list[tuple[subprocess.Popen, Path]] = []

    def start(self, cfg_path: Path, *, sleep: float = 0.05) -> subprocess.Popen:
        """A real worker process whose fetches sleep `sleep` seconds (`tests.sleepy_worker`)."""
        err = self.tmp_path / f"worker{len(self.started)}.err"
        with err.open("wb") as sink:
            proc = harness.spawn("worker", cfg_path, sleep=sleep, stderr=sink)
        self.started.append((proc, err))
        return proc

    def stderr(self, proc: subprocess.Popen) -> str:
        return next(e for p, e in self.started if p is proc).read_text()

    def kill_all(self) -> None:
        for proc, _ in self.started:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def procs(tmp_path):
    p = Procs(tmp_path)
    yield p
    p.kill_all()


@pytest.fixture
def env(tmp_path, state_dir):
    def make(**batch):
        cfg_path = write_config(tmp_path, state_dir, **batch)
        cfg = config.load(cfg_path)
        store = open_store(cfg)
        opened.append(store)
        return cfg_path, cfg, store

    opened = []
    yield make
    for s in opened:
        s.close()


def until(predicate, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met in time")
        time.sleep(0.01)


def beating(store, pid: int) -> bool:
    beat = view(store).heartbeat()
    return beat is not None and beat.pid == pid


def new_job(store, cfg, *names) -> str:
    targets = [{"url": f"http://127.0.0.1:9/{n}"} for n in names]
    with Nudger(cfg.state_dir) as nudger:
        sub = asyncio.run(
            submit(store, cfg.batch, ALICE, targets, now=time.time(), nudge=nudger.send)
        )
    return sub.job_id


def statuses(store, job_id) -> list[str]:
    return [t.status for t in view(store).targets(job_id)]


def counter(store, name: str, label: str) -> float:
    return view(store).counters().get((name, label), 0)


# -- singleton lock and restart -----------------------------------------------------------------


def test_a_second_worker_stands_by_and_takes_over_when_the_first_is_killed(env, procs):
    cfg_path, cfg, store = env()
    first = procs.start(cfg_path, sleep=60)
    until(lambda: beating(store, first.pid), what="first worker active")
    job = new_job(store, cfg, "slow0", "slow1")
    until(lambda: statuses(store, job)[0] == "running", what="target in flight")

    second = procs.start(cfg_path, sleep=60)
    until(lambda: "standing by" in procs.stderr(second), what="standby")
    time.sleep(0.3)
    assert beating(store, first.pid) and second.poll() is None
    assert view(store).job(job).status == "running"  # the standby touched nothing

    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    until(lambda: beating(store, second.pid), what="takeover")
    got, rows = view(store).status(job)
    assert (got.status, got.error) == ("failed", "restart")
    assert [r.status for r in rows] == ["pending", "pending"]
    assert counter(store, "sift_batch_jobs_total", "restart") == 1
    assert "taking over" in procs.stderr(second)

    later = new_job(store, cfg, "slow2")  # the new active worker drains new jobs
    until(lambda: statuses(store, later) == ["running"], what="new job drained")
    os.kill(second.pid, signal.SIGTERM)


def test_a_nudge_wakes_the_worker_process_much_sooner_than_its_poll_interval(env, procs):
    cfg_path, cfg, store = env(poll_interval=5.0)
    proc = procs.start(cfg_path, sleep=0)
    until(lambda: beating(store, proc.pid), what="worker active")
    time.sleep(0.2)  # the worker has found nothing and waits for its poll
    t0 = time.monotonic()
    job = new_job(store, cfg, "a")
    until(lambda: view(store).job(job).status == "done", what="job done")
    assert time.monotonic() - t0 < cfg.batch.poll_interval / 5


# -- shutdown -------------------------------------------------------------------------------------


def test_sigterm_lets_the_fetch_in_flight_finish_and_exits_0_within_grace(env, procs):
    cfg_path, cfg, store = env(grace=10.0)
    proc = procs.start(cfg_path, sleep=0.5)
    until(lambda: beating(store, proc.pid), what="worker active")
    job = new_job(store, cfg, "a", "b")
    until(lambda: statuses(store, job)[0] == "running", what="target in flight")
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=cfg.batch.grace) == 0
    assert time.monotonic() - t0 < cfg.batch.grace / 2
    assert statuses(store, job) == ["done", "pending"]  # finished, and nothing new started
    assert view(store).heartbeat() is None  # a clean exit clears its heartbeat


def test_sigterm_cancels_a_fetch_that_outlasts_the_grace_period_and_exits_0(env, procs):
    cfg_path, cfg, store = env(grace=0.3)
    proc = procs.start(cfg_path, sleep=60)
    until(lambda: beating(store, proc.pid), what="worker active")
    job = new_job(store, cfg, "a")
    until(lambda: statuses(store, job) == ["running"], what="target in flight")
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - t0 < 60 / 10  # far less than the fetch would have taken
    row = view(store).targets(job)[0]
    assert (row.status, row.hint) == ("failed", "retry") and "shut down" in row.error
    assert counter(store, "sift_batch_targets_total", "cancel") == 1


def test_a_standby_stops_on_sigterm_with_exit_0(env, procs):
    cfg_path, _, store = env()
    first = procs.start(cfg_path)
    until(lambda: beating(store, first.pid), what="first worker active")
    second = procs.start(cfg_path)
    until(lambda: "standing by" in procs.stderr(second), what="standby")
    os.kill(second.pid, signal.SIGTERM)
    assert second.wait(timeout=10) == 0
    assert first.poll() is None and beating(store, first.pid)


# -- start-up errors ------------------------------------------------------------------------------


def test_a_state_dir_that_cannot_be_created_exits_2_with_one_line_on_stderr(tmp_path, procs):
    (tmp_path / "file").write_text("in the way\n")
    cfg_path = write_config(tmp_path, tmp_path / "file" / "missing")
    proc = procs.start(cfg_path)
    assert proc.wait(timeout=30) == 2
    err = procs.stderr(proc)
    assert err.count("\n") == 1 and "state dir" in err and "does not exist" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_state_dir_exits_2_with_one_line_on_stderr(tmp_path, state_dir, procs):
    state_dir.chmod(0o500)
    try:
        proc = procs.start(write_config(tmp_path, state_dir))
        assert proc.wait(timeout=30) == 2
        err = procs.stderr(proc)
        assert err.count("\n") == 1 and "not writable" in err
    finally:
        state_dir.chmod(0o700)


# -- supervision (in process, signals left alone) ------------------------------------------------


async def test_the_worker_stops_with_exit_1_when_its_nudge_listener_dies(state_dir, tmp_path):
    cfg = config.load(write_config(tmp_path, state_dir))

    async def fetch(claim):
        return {"success": True}

    worker = Worker(cfg, fetch=fetch, handle_signals=False)
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.active.wait(), 10)
    listener = next(t for t in asyncio.all_tasks() if t.get_name() == "nudge-listener")
    listener.cancel()
    assert await asyncio.wait_for(run, 10) == EXIT_DIED
    assert not worker.lock.held and not (state_dir / "worker.sock").exists()


async def test_stop_ends_an_in_process_worker_with_exit_0(state_dir, tmp_path):
    cfg = config.load(write_config(tmp_path, state_dir))

    async def fetch(claim):
        return {"success": True}

    worker = Worker(cfg, fetch=fetch, handle_signals=False)
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.active.wait(), 10)
    assert (state_dir / "worker.sock").exists()
    worker.stop()
    assert await asyncio.wait_for(run, 10) == EXIT_OK


# -- the production fetch --------------------------------------------------------------------------


async def test_the_worker_fetches_targets_through_the_pipeline_as_the_jobs_caller(
    aiohttp_server, state_dir
):
    site = await aiohttp_server(make_site())
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state_dir)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
            "batch": {"poll_interval": 0.2},
        }
    )
    store = open_store(cfg)
    worker = Worker(cfg, handle_signals=False)  # no fetch injected: the real pipeline
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.active.wait(), 10)
        base = f"http://127.0.0.1:{site.port}"
        targets = [{"url": f"{base}/article/1"}, {"url": f"{base}/status/404"}]
        with Nudger(cfg.state_dir) as nudger:
            sub = await submit(store, cfg.batch, ALICE, targets, now=time.time(), nudge=nudger)
        for _ in range(1000):
            if view(store).job(sub.job_id).status == "partial":
                break
            await asyncio.sleep(0.01)
        got, rows = view(store).status(sub.job_id)
        assert got.status == "partial"
        assert "breakwater" in orjson.loads(rows[0].result)["content"]
        assert (rows[1].status, rows[1].hint, rows[1].retryable) == ("failed", "recover", 0)
        # Batch targets obey robots.txt (docs/WORKER.md §robots.txt): read once, first.
        assert site.app[HITS] == ["/robots.txt", "/article/1", "/status/404"]
    finally:
        worker.stop()
        assert await asyncio.wait_for(run, 10) == EXIT_OK
        store.close()


async def test_the_heartbeat_is_rewritten_every_interval(state_dir, tmp_path):
    cfg = config.load(write_config(tmp_path, state_dir))
    store = open_store(cfg)
    ticks = iter(range(1000, 2000))
    beat = asyncio.create_task(
        beat_forever(store, pid=4242, started_at=999.0, clock=lambda: next(ticks), every=0.01)
    )
    try:
        for _ in range(500):
            got = view(store).heartbeat()
            if got is not None and got.heartbeat >= 1003:
                break
            await asyncio.sleep(0.01)
        assert (got.pid, got.started_at) == (4242, 999.0) and got.heartbeat >= 1003
    finally:
        beat.cancel()
        await asyncio.gather(beat, return_exceptions=True)
        store.close()
