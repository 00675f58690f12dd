"""Hold N long-polls on one job from a process of its own: `python -m tests.e2e.holders`.

Arguments: API base URL, key, job id, N. Prints `held` once every request's headers are on
the wire, then, when the job has ended, one JSON line: the (status, job status) of each answer.
Running the clients in their own process keeps their CPU and the GIL away from the test site,
which lives in the test process.
"""

from __future__ import annotations

import asyncio
import sys

import aiohttp
import orjson


async def hold(base: str, key: str, job_id: str, n: int) -> list[tuple[int, str]]:
    sent = 0
    all_sent = asyncio.Event()

    async def on_headers_sent(session, ctx, params) -> None:
        nonlocal sent
        sent += 1
        if sent == n:
            all_sent.set()

    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(on_headers_sent)
    headers = {"Authorization": f"Bearer {key}"}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        headers=headers, connector=conn, trust_env=False, trace_configs=[trace]
    ) as s:

        async def one() -> tuple[int, str]:
            url = f"{base}/v1/batch/{job_id}?wait=60&results=false"
            async with s.get(url, timeout=aiohttp.ClientTimeout(total=90)) as resp:
                return resp.status, (await resp.json())["status"]

        tasks = [asyncio.create_task(one()) for _ in range(n)]
        await all_sent.wait()
        print("held", flush=True)
        return await asyncio.gather(*tasks)


def main() -> None:
    base, key, job_id, n = sys.argv[1:5]
    answers = asyncio.run(hold(base, key, job_id, int(n)))
    sys.stdout.write(orjson.dumps(answers).decode() + "\n")


if __name__ == "__main__":
    main()
