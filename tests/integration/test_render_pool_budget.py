"""The render pool's memory budget and its count of children, with a real pool and real
forked children (docs/SECURITY.md §The render pool's memory budget)."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from sift.config import RenderConfig
from sift.errors import RenderBusy, TooLong
from sift.fetch import jq, render_child, renderbudget
from sift.fetch.renderpool import RenderPool, _forkserver_pid

MIB = 1024 * 1024
_KEPT: list[bytes] = []


def grow(mib: int, hold: float = 0.5, keep: bool = False) -> int:
    """Allocate `mib` MiB, 8 MiB every 50 ms (written, so resident), then hold them."""
    chunks = []
    for _ in range(0, mib, 8):
        chunks.append(b"\x01" * (8 * MIB))
        time.sleep(0.05)
    time.sleep(hold)
    if keep:
        _KEPT.extend(chunks)
    return len(chunks)


def pool_pss(pool: RenderPool, *, killed: bool = True) -> int:
    """PSS of the fork server and every child of the pool, as the budget counts it; without
    the children it killed already (`killed=False`), whose pages are on their way back at the
    pace the loaded kernel lets a dying process run."""
    children = [c.pid for c in pool._all if killed or not c.over_budget]
    pids = [*children, *([_forkserver_pid()] if pool.pids else [])]
    return sum(renderbudget.sizes(p for p in pids if p).values())


async def baseline() -> int:
    """The fork server and one child at rest (the fork server preloads what this process's
    main module imports, so under a test runner it is larger than under the worker)."""
    pool = RenderPool(RenderConfig())
    try:
        await pool.run("a", os.getpid, timeout=10)
        return pool_pss(pool)
    finally:
        await pool.close()


async def test_a_step_past_its_share_of_the_pool_budget_fails_413_while_a_small_one_succeeds():
    pool = RenderPool(RenderConfig(pool_memory=await baseline() + 64 * MIB, demote_after=30))
    try:
        bomb = pool.run("bomber", grow, 200, 1.0, timeout=20)
        small = pool.run("reader", grow, 8, 1.5, timeout=20)
        bombed, done = await asyncio.gather(bomb, small, return_exceptions=True)
        assert isinstance(bombed, TooLong) and "pool_memory" in bombed.msg
        assert bombed.status == 413
        assert done == 1
        assert pool.over_budget == 1
    finally:
        await pool.close()


async def test_the_pool_total_stays_within_its_budget():
    budget = await baseline() + 96 * MIB  # room for one of the four steps, not two
    pool = RenderPool(RenderConfig(pool_memory=budget, children=4, per_caller=4, demote_after=30))
    peak = 0

    async def sample():
        nonlocal peak
        while True:
            peak = max(peak, pool_pss(pool, killed=False))
            await asyncio.sleep(0.01)

    sampler = asyncio.ensure_future(sample())
    try:
        steps = [pool.run("caller", grow, 64, 1.0, timeout=20) for _ in range(4)]
        results = await asyncio.gather(*steps, return_exceptions=True)
    finally:
        sampler.cancel()
        await pool.close()
    assert any(isinstance(r, TooLong) for r in results), results
    assert any(r == 8 for r in results), results
    # Past the budget by what the busy children grow in about one sampling interval at most
    # (4 x 8 MiB per 50 ms; longer when the loaded machine delays the sampler).
    assert peak <= budget + 64 * MIB, peak / MIB


async def test_idle_children_are_recycled_before_a_busy_step_is_killed():
    budget = await baseline() + 120 * MIB  # the fat idle child and the growing step don't fit
    pool = RenderPool(RenderConfig(pool_memory=budget, children=3, demote_after=30))
    try:
        # Two children: the fat one keeps 64 MiB and goes idle first, so the next step takes
        # the other (the most recently used idle child).
        fat, _ = await asyncio.gather(
            pool.run("a", _grow_pid, 64, timeout=20), pool.run("b", _sleep_pid, 1.5, timeout=20)
        )
        assert fat in pool.pids
        assert await pool.run("c", grow, 72, 1.0, timeout=20) == 9
        assert fat not in pool.pids
        assert pool.over_budget == 0
    finally:
        await pool.close()


async def test_no_more_than_children_render_children_are_alive_at_once():
    pool = RenderPool(RenderConfig(children=2, per_caller=8))
    most = 0

    async def count():
        nonlocal most
        while True:
            most = max(most, len(pool.pids))
            await asyncio.sleep(0.005)

    counter = asyncio.ensure_future(count())
    try:
        pool.prestart(2)
        pids = await asyncio.gather(
            *(pool.run("caller", _sleep_pid, 0.3, timeout=20) for _ in range(6))
        )
    finally:
        counter.cancel()
        await pool.close()
    assert most <= 2 and len(pids) == 6, (most, pids)


async def test_a_step_that_waits_its_whole_time_for_a_child_fails_render_busy():
    pool = RenderPool(RenderConfig(children=1))
    try:
        long = asyncio.ensure_future(pool.run("a", _sleep_pid, 2.0, timeout=10))
        await asyncio.sleep(0.3)
        with pytest.raises(RenderBusy) as failed:
            await pool.run("b", os.getpid, timeout=0.5)
        assert failed.value.status == 429 and failed.value.retryable
        assert "[render] children" in failed.value.msg
        await long
    finally:
        await pool.close()


async def test_a_jq_child_counts_in_the_pool_budget():
    pool = RenderPool(RenderConfig(pool_memory=64 * MIB))  # no render child: jq's alone
    try:
        with pytest.raises(TooLong) as failed:
            async with pool.jq_slot("a") as run:
                await jq.run_jq(
                    "[range(20000000)] | length",
                    b"null",
                    timeout=20,
                    memory=1024 * MIB,
                    started=run.started,
                )
        assert "pool_memory" in failed.value.msg
        assert pool.over_budget == 1
    finally:
        await pool.close()


async def test_a_childs_address_space_is_its_start_plus_the_pool_budget_at_most():
    cfg = RenderConfig(pool_memory=128 * MIB)
    pool = RenderPool(cfg)
    try:
        limit = await pool.run("a", render_child.address_limit, timeout=10)
        mapped = renderbudget.mapped(await pool.run("a", os.getpid, timeout=10))
        assert limit < cfg.memory
        assert mapped < limit <= mapped + cfg.pool_memory
    finally:
        await pool.close()


async def test_the_pool_starts_no_resource_tracker():
    pool = RenderPool(RenderConfig())
    try:
        await pool.run("a", os.getpid, timeout=10)
        mine = _descendants(os.getpid())
        names = [_cmdline(p) for p in mine]
        assert any("forkserver" in n for n in names), names
        assert not any("resource_tracker" in n for n in names), names
    finally:
        await pool.close()


def _grow_pid(mib: int) -> int:
    grow(mib, 0.0, keep=True)
    return os.getpid()


def _sleep_pid(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _descendants(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            for child in map(int, f.read().split()):
                found += [child, *_descendants(child)]
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


async def test_between_full_reads_a_childs_pss_is_estimated_from_its_rss_growth():
    pool = RenderPool(RenderConfig(demote_after=30))
    meter = renderbudget.Meter()
    try:
        pid = await pool.run("a", os.getpid, timeout=10)
        before = meter.sizes([pid], now=0.0)[pid]  # a full read
        step = asyncio.ensure_future(pool.run("a", grow, 48, 1.5, timeout=20))
        await asyncio.sleep(1.2)  # grown by 48 MiB, still holding them
        estimate = meter.sizes([pid], now=renderbudget.REFRESH / 2)[pid]
        exact = renderbudget.pss(pid)
        await step
    finally:
        await pool.close()
    assert estimate - before > 40 * MIB
    assert abs(estimate - exact) < 8 * MIB, (estimate / MIB, exact / MIB)


class _SlowMeter(renderbudget.Meter):
    """Real reads that take `delay` seconds more each, as a bombed child's page tables do on a
    loaded machine; `gate` (when given) holds the first full read that finds more than `over`
    bytes until the test opens it."""

    def __init__(self, delay: float = 0.0, gate: threading.Event | None = None, over: int = 0):
        super().__init__()
        self.delay, self.gate, self.over, self.held = delay, gate, over, 0
        self.full_reads = 0

    def exact(self, pids, keep: bool = False):
        sizes = super().exact(pids, keep)
        self.full_reads += 1
        if self.gate is not None and not self.held and sum(sizes.values()) > self.over:
            self.held = 1
            self.gate.wait(20)
        time.sleep(self.delay)
        return sizes


async def test_the_budget_reads_sizes_off_the_event_loop():
    pool = RenderPool(RenderConfig(pool_memory=await baseline() + 16 * MIB, demote_after=30))
    pool._meter = meter = _SlowMeter(delay=0.3)
    longest, last = 0.0, time.perf_counter()

    async def tick():
        nonlocal longest, last
        while True:
            await asyncio.sleep(0.01)
            longest, last = max(longest, time.perf_counter() - last), time.perf_counter()

    ticker = asyncio.ensure_future(tick())
    try:
        with pytest.raises(TooLong):
            await pool.run("bomber", grow, 200, 1.0, timeout=20)
    finally:
        ticker.cancel()
        await pool.close()
    assert meter.full_reads >= 1
    assert longest < 0.2, longest  # each full read held the loop 0.3 s when it ran there


async def test_a_kill_spares_a_step_that_began_after_the_read_that_judged_its_child():
    budget = await baseline() + 32 * MIB
    pool = RenderPool(RenderConfig(pool_memory=budget, demote_after=30))
    gate = threading.Event()
    pool._meter = meter = _SlowMeter(gate=gate, over=budget)
    try:
        # The first step outgrows the budget; its full read is held until it has returned and
        # the same child runs a small step, which the read's sizes would condemn.
        assert await pool.run("a", grow, 64, 0.5, timeout=20) == 8
        second = asyncio.ensure_future(pool.run("b", _sleep_pid, 1.0, timeout=20))
        await asyncio.sleep(0.3)
        assert meter.held
        gate.set()
        assert await second in pool.pids
        assert pool.over_budget == 0
    finally:
        gate.set()
        await pool.close()
