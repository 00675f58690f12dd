"""`?wait=S` under load: many held requests cost the worker nothing (SPEC §4.1)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from tests.e2e.procs import wait_for_job_status

pytestmark = pytest.mark.e2e

HELD = 200


def urls(site, tag: str, n: int = 8) -> list[str]:
    return [site.url(f"/slow?s=0.05&{tag}={i}") for i in range(n)]


def drain_alone(sift, site, tag: str) -> float:
    t0 = time.monotonic()
    status, body = sift.submit(urls(site, tag))
    assert status == 202, body
    assert wait_for_job_status(sift, body["job_id"], timeout=60)["status"] == "done"
    return time.monotonic() - t0


async def drain_held(sift, site, tag: str) -> tuple[float, list[tuple[int, str]]]:
    """Submit, then hold HELD requests on the job until it ends; (seconds, answers)."""
    headers = {"Authorization": f"Bearer {sift.keys['alice']}"}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(headers=headers, connector=conn, trust_env=False) as s:
        t0 = time.monotonic()
        body = {"targets": [{"url": u} for u in urls(site, tag)]}
        async with s.post(f"{sift.base}/v1/batch", json=body) as resp:
            assert resp.status == 202
            job_id = (await resp.json())["job_id"]

        async def one() -> tuple[int, str]:
            url = f"{sift.base}/v1/batch/{job_id}?wait=30&results=false"
            async with s.get(url) as resp:
                return resp.status, (await resp.json())["status"]

        answers = await asyncio.gather(*(one() for _ in range(HELD)))
        return time.monotonic() - t0, answers


def test_two_hundred_held_requests_do_not_slow_the_worker(sift, site, tag):
    alone = drain_alone(sift, site, f"{tag}a")
    loaded, answers = asyncio.run(drain_held(sift, site, f"{tag}b"))
    assert answers == [(200, "done")] * HELD
    assert loaded < alone * 1.5 + 0.3, (alone, loaded)
