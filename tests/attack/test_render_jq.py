"""jq children together stay within a memory bound and go first when memory runs out
(docs/SECURITY.md §Untrusted programs and patterns): real jq child processes, a real pool."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest

from sift.config import RenderConfig
from sift.errors import InvalidTarget
from sift.fetch import jq
from sift.fetch.renderpool import RenderPool

SLOW = "reduce range(0; 100000000) as $i (0; . + 1)"  # seconds of CPU, then the time limit


def jq_children() -> dict[int, int]:
    """This process's jq children and each one's oom_score_adj."""
    out = {}
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            for pid in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    if b"jq_child.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        out[int(pid)] = int(Path(f"/proc/{pid}/oom_score_adj").read_text())
    return out


async def test_jq_children_together_are_bounded_and_are_the_oom_killers_first_choice():
    cfg = RenderConfig(memory=jq.TOTAL_MEMORY // 2, children=6, per_caller=2)
    pool = RenderPool(cfg)
    at_once, scores = 0, {}

    async def one(n: int) -> None:
        async with pool.jq_slot(f"caller{n}"):
            with contextlib.suppress(InvalidTarget):
                await jq.run_jq(SLOW, b"null", timeout=1.5, memory=cfg.memory)

    runs = asyncio.gather(*(one(n) for n in range(5)))
    try:
        while not runs.done():
            seen = jq_children()
            at_once = max(at_once, len(seen))
            scores.update(seen)
            await asyncio.sleep(0.05)
        await runs
    finally:
        await pool.close()
    assert 1 <= at_once <= jq.TOTAL_MEMORY // cfg.memory == 2
    assert scores and set(scores.values()) == {1000}, scores


async def test_a_jq_program_past_its_memory_fails_its_target_only():
    with pytest.raises(InvalidTarget, match="limit"):
        await jq.run_jq("[range(100000000)] | length", b"null", timeout=20, memory=256 << 20)


async def test_a_jq_child_runs_without_the_network_and_under_landlock():
    from sift.fetch import sandbox

    if sandbox.abi() < 1:
        pytest.skip("this kernel has no Landlock")
    ours = os.readlink("/proc/self/ns/net")
    seen: dict[int, tuple[str, str]] = {}
    run = asyncio.ensure_future(jq.run_jq(SLOW, b"null", timeout=1.5))
    while not run.done():
        for pid in jq_children():
            with contextlib.suppress(OSError):
                status = Path(f"/proc/{pid}/status").read_text()
                nnp = next(line for line in status.splitlines() if line.startswith("NoNewPrivs"))
                seen[pid] = (os.readlink(f"/proc/{pid}/ns/net"), nnp.split()[1])
        await asyncio.sleep(0.05)
    with contextlib.suppress(InvalidTarget):
        await run
    assert seen
    net, no_new_privs = list(seen.values())[-1]
    assert net != ours and no_new_privs == "1", seen
