"""What an agent pays for going through `sift mcp` instead of calling the API itself.

Two figures, each against a baseline measured in the same run on the same processes:
* `fetch` through MCP (the official SDK's client session over stdio → `sift mcp` →
  `sift.client` → the API) vs the same `POST /v1/fetch` sent straight over HTTP, on a content
  cache hit (where the overhead is most visible): p50 ratio, goal < 1.3.
* a 32-target batch through `batch_submit` + `batch_wait` vs the HTTP round trip
  (`POST /v1/batch` + `GET /v1/batch/{id}?wait=60`), submit to full results, goal < 1.05. On a
  shared machine the drain itself varies by tens of percent from job to job, so besides the
  ratio of medians the script measures each path's fixed cost on an ended job (a reused submit
  and a wait that answers at once) and reports (median drain + MCP fixed cost) ÷ (median drain
  + HTTP fixed cost).
Rounds alternate between MCP and HTTP so the machine's drift hits both alike. Also printed: the
SDK's own round trip (`ping`, no tool), the floor under any MCP tool call, and fetch on a cache
miss, where the page's fetch and render dwarf the protocol.

    .venv/bin/python bench/mcp.py [--calls 200] [--batches 8] [--misses 60] [--delay 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would hide the SDK.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import aiohttp  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from bench.common import ROOT, Sift, Site, median, pct, show  # noqa: E402


async def http_fetch(session: aiohttp.ClientSession, sift: Sift, url: str) -> float:
    t = time.perf_counter()
    async with session.post(sift.url + "/v1/fetch", json={"url": url}) as resp:
        body = await resp.json()
    assert body["success"], body
    return (time.perf_counter() - t) * 1000


async def mcp_fetch(mcp: ClientSession, url: str) -> float:
    t = time.perf_counter()
    result = await mcp.call_tool("fetch", {"url": url, "max_length": 100_000})
    assert not result.is_error, result.content
    return (time.perf_counter() - t) * 1000


async def http_batch(session: aiohttp.ClientSession, sift: Sift, urls: list[str]) -> float:
    t = time.perf_counter()
    async with session.post(
        sift.url + "/v1/batch", json={"targets": [{"url": u} for u in urls]}
    ) as resp:
        job = await resp.json()
    async with session.get(f"{sift.url}/v1/batch/{job['job_id']}?wait=60") as resp:
        status = await resp.json()
    assert status["status"] == "done", status["status"]
    return time.perf_counter() - t


async def mcp_batch(mcp: ClientSession, urls: list[str]) -> float:
    t = time.perf_counter()
    sub = await mcp.call_tool("batch_submit", {"targets": urls})
    job_id = sub.structured_content["job_id"]
    waited = await mcp.call_tool("batch_wait", {"job_id": job_id, "timeout": 120})
    assert waited.structured_content["status"] == "done", waited.content
    return time.perf_counter() - t


async def run(sift: Sift, site: Site, calls: int, batches: int, misses: int) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sift", "mcp"],
        env={"SIFT_URL": sift.url, "SIFT_KEY": sift.key, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    headers = {"Authorization": f"Bearer {sift.key}"}
    async with (
        aiohttp.ClientSession(headers=headers) as session,
        stdio_client(params, errlog=open(os.devnull, "w")) as streams,
        ClientSession(*streams) as mcp,
    ):
        await mcp.initialize()
        url = site.url(1, "hit")
        await http_fetch(session, sift, url)  # the miss that fills the cache
        for _ in range(20):  # warm both paths
            await http_fetch(session, sift, url)
            await mcp_fetch(mcp, url)
        direct, through = [], []
        for _ in range(calls):
            direct.append(await http_fetch(session, sift, url))
            through.append(await mcp_fetch(mcp, url))
        r = await mcp.call_tool("fetch", {"url": url, "max_length": 100_000})
        chars = len(r.content[0].text)
        pings = []
        for _ in range(calls):
            t = time.perf_counter()
            await mcp.send_ping()
            pings.append((time.perf_counter() - t) * 1000)
        miss_direct, miss_through = [], []
        for i in range(misses):  # a new URL each time: both paths fetch and render
            miss_direct.append(await http_fetch(session, sift, site.url(i, f"miss-h{i}")))
            miss_through.append(await mcp_fetch(mcp, site.url(i, f"miss-m{i}")))

        http_s, mcp_s = [], []
        for b in range(batches):  # which one goes first alternates too
            http_urls = [site.url(i, f"h{b}-{i}") for i in range(32)]
            mcp_urls = [site.url(i, f"m{b}-{i}") for i in range(32)]
            if b % 2:
                mcp_s.append(await mcp_batch(mcp, mcp_urls))
            http_s.append(await http_batch(session, sift, http_urls))
            if not b % 2:
                mcp_s.append(await mcp_batch(mcp, mcp_urls))
        # The same calls on a job that has ended (a reused submit, a wait that returns at once):
        # what each path adds to a batch whatever its drain takes.
        ended_http, ended_mcp = [], []
        for _ in range(max(10, batches * 2)):
            ended_http.append(await http_batch(session, sift, http_urls) * 1000)
            ended_mcp.append(await mcp_batch(mcp, mcp_urls) * 1000)

    fixed_http = median(ended_http)
    fixed_mcp = median(ended_mcp)
    typical = median(http_s)
    show(
        f"fetch on a cache hit ({chars} characters of content), {calls} calls each",
        [
            ("POST /v1/fetch p50", f"{median(direct):.2f} ms (p90 {pct(direct, 90):.2f})"),
            ("MCP fetch p50", f"{median(through):.2f} ms (p90 {pct(through, 90):.2f})"),
            ("MCP overhead p50", f"{median(through) - median(direct):.2f} ms"),
            ("ratio p50 (goal < 1.3)", f"{median(through) / median(direct):.2f}"),
            ("MCP ping p50 (the SDK's own round trip)", f"{median(pings):.2f} ms"),
        ],
    )
    show(
        f"fetch on a cache miss (site delay {site.delay * 1000:g} ms), {misses} calls each",
        [
            ("POST /v1/fetch p50", f"{median(miss_direct):.2f} ms"),
            ("MCP fetch p50", f"{median(miss_through):.2f} ms"),
            ("ratio p50", f"{median(miss_through) / median(miss_direct):.3f}"),
        ],
    )
    show(
        f"32-target batch, submit to all results, {batches} each",
        [
            ("HTTP submit + ?wait=60", ", ".join(f"{s * 1000:.0f}" for s in http_s) + " ms"),
            ("MCP batch_submit + batch_wait", ", ".join(f"{s * 1000:.0f}" for s in mcp_s) + " ms"),
            ("ratio of medians (noisy: drains vary)", f"{median(mcp_s) / median(http_s):.3f}"),
            ("fixed cost, HTTP submit + read ended job", f"{fixed_http:.1f} ms"),
            ("fixed cost, MCP batch_submit + batch_wait", f"{fixed_mcp:.1f} ms"),
            (
                "ratio, median drain + fixed cost (goal < 1.05)",
                f"{(typical * 1000 + fixed_mcp - fixed_http) / (typical * 1000):.3f}",
            ),
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--misses", type=int, default=60)
    ap.add_argument("--delay", type=float, default=0.02, help="site delay per page, seconds")
    args = ap.parse_args()
    site = Site(delay=args.delay, pages=64).start()
    sift = Sift(site.port, batch={"jobs_per_caller": 4}).start()
    try:
        asyncio.run(run(sift, site, args.calls, args.batches, args.misses))
    finally:
        sift.stop()
        site.stop()


if __name__ == "__main__":
    main()
