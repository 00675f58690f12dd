"""The render pool's priorities (docs/SECURITY.md §Limits and isolation), with real children."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import types

import pytest

from sift.config import RenderConfig
from sift.fetch.renderpool import DEMOTED_NICE, HEAVY_NICE, RenderPool, _main_preload, _request


async def nice_of_a_step(pool: RenderPool, owner: str) -> int:
    return await pool.run(owner, os.getpriority, os.PRIO_PROCESS, 0, timeout=5)


def spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


async def test_a_callers_steps_start_demoted_after_one_of_its_steps_used_past_demote_after():
    pool = RenderPool(RenderConfig(demote_after=0.1))
    try:
        normal = await nice_of_a_step(pool, "bomber")
        assert normal < DEMOTED_NICE
        await pool.run("bomber", spin, 0.4, timeout=5)
        assert pool.is_heavy("bomber")
        assert await nice_of_a_step(pool, "bomber") == HEAVY_NICE
        assert await nice_of_a_step(pool, "reader") == normal
    finally:
        await pool.close()


async def test_a_heavy_callers_step_gets_a_new_child_and_leaves_the_warm_ones_to_others():
    pool = RenderPool(RenderConfig(demote_after=0.1))
    try:
        await pool.run("bomber", spin, 0.4, timeout=5)  # its child is demoted, then replaced
        warm = await pool.run("reader", os.getpid, timeout=5)
        assert await pool.run("bomber", os.getpid, timeout=5) != warm
        assert await pool.run("reader", os.getpid, timeout=5) == warm
    finally:
        await pool.close()


async def test_a_step_that_waits_rather_than_computes_leaves_its_caller_at_full_priority():
    pool = RenderPool(RenderConfig(demote_after=0.1))
    try:
        await pool.run("reader", time.sleep, 0.4, timeout=5)  # slow, as under others' load
        assert not pool.is_heavy("reader")
        assert await nice_of_a_step(pool, "reader") < DEMOTED_NICE
    finally:
        await pool.close()


def main_module(monkeypatch, *, spec_of: str | None = None, **globals_) -> None:
    main = types.ModuleType("__main__")
    main.__spec__ = importlib.util.find_spec(spec_of) if spec_of else None
    if not spec_of:
        main.__file__ = "/opt/sift/.venv/bin/sift-worker"
    vars(main).update(globals_)
    monkeypatch.setitem(sys.modules, "__main__", main)


def test_the_fork_server_preloads_what_a_new_child_would_import_again(monkeypatch):
    from worker.main import main as entry

    main_module(monkeypatch, main=entry, sys=sys)  # a console script
    assert "worker.main" in _main_preload()
    main_module(monkeypatch, spec_of="worker.main")  # python -m worker.main
    assert _main_preload() == ["worker.main"]
    main_module(monkeypatch, spec_of="sift.__main__")  # python -m sift: never run again
    assert _main_preload() == []


def test_a_large_body_travels_to_the_child_beside_the_pickle_not_copied_into_it():
    body = os.urandom(2 * 1024 * 1024)
    (count, call), *buffers = _request(len, (body, "small"), 5.0)
    assert int.from_bytes(count, "big") == 1 and len(call) < 1024
    assert len(buffers) == 1 and buffers[0][0].obj is body


async def test_a_step_receives_its_large_body_whole():
    body = os.urandom(3 * 1024 * 1024 + 17)
    pool = RenderPool(RenderConfig())
    try:
        assert await pool.run("reader", bytes.hex, body[:70_000], timeout=5) == body[:70_000].hex()
        assert await pool.run("reader", len, body, timeout=5) == len(body)
    finally:
        await pool.close()


async def test_a_step_stopped_by_a_cap_of_its_own_makes_its_caller_heavy():
    from sift.errors import TooLong
    from sift.fetch import pdf
    from tests.bombs import pdf_bomb

    pool = RenderPool(RenderConfig())
    try:
        with pytest.raises(TooLong):
            await pool.run(
                "bomber",
                pdf.pdf_text_checked,
                pdf_bomb(),
                1024 * 1024,
                None,
                500,
                "text",
                timeout=30,
            )
        assert pool.is_heavy("bomber")
        assert not pool.is_heavy("reader")
    finally:
        await pool.close()


async def test_a_dead_idle_child_is_never_handed_to_the_next_step():
    import signal

    pool = RenderPool(RenderConfig())
    try:
        first = await pool.run("reader", os.getpid, timeout=5)
        os.kill(first, signal.SIGKILL)
        time.sleep(0.2)  # dead, and the loop has not run since: nothing has noticed yet
        second = await pool.run("reader", os.getpid, timeout=5)
        assert second != first
        assert first not in pool.pids
    finally:
        await pool.close()


async def test_prestart_leaves_a_warmed_child_for_the_first_step():
    pool = RenderPool(RenderConfig())
    try:
        pool.prestart()
        await pool._warming
        [warm] = pool.pids
        assert await pool.run("reader", os.getpid, timeout=5) == warm
    finally:
        await pool.close()
