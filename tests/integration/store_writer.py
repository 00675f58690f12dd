"""A child process for the two-process store test: submits jobs, or claims and finishes targets.

    python -m tests.integration.store_writer submitter|finisher DB START_AT SECONDS STOP_FILE

Both roles wait until the wall clock reaches START_AT, open the (possibly fresh) database at
the same moment, work for SECONDS, and print one JSON line with what they did and every error
they saw. The finisher then keeps draining until STOP_FILE exists and no live job is left.
Outcomes are a pure function of (job id, idx), so the parent can check every stored row.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

from sift.store import NewTarget, Store, batch_sql
from sift.store.db import Database
from tests.dbview import DbView

CALLERS = ("c0", "c1", "c2")
CAPS = {"targets_per_job": 6, "jobs_per_caller": 8, "jobs_total": 20}
TTL = 86_400.0


def outcome_for(job_id: str, idx: int, busy_before: bool) -> str:
    """ok, a failure outcome, or busy once (the target is requeued and then stored)."""
    h = zlib.crc32(f"{job_id}/{idx}".encode()) % 10
    if h == 0 and not busy_before:
        return "busy"
    return {1: "timeout", 2: "blocked", 3: "upstream_5xx"}.get(h, "ok")


def result_for(job_id: str, idx: int) -> str:
    """A result whose UTF-8 length differs from its character count."""
    return json.dumps({"content": "é" * (idx + 1) + job_id}, ensure_ascii=False)


class Recorder:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.counts: Counter[str] = Counter()

    async def call(self, fn, *args, **kwargs):
        try:
            return await fn(*args, **kwargs)
        except Exception as e:
            if len(self.errors) < 50:
                self.errors.append(f"{type(e).__name__}: {e}")
            self.counts["errors"] += 1
            return None


async def submitter(store: Store, rec: Recorder, deadline: float) -> dict:
    jobs: dict[str, int] = {}
    cancelled: list[str] = []
    first = last = None
    i = 0
    while time.time() < deadline:
        i += 1
        caller = CALLERS[i % len(CALLERS)]
        n = 1 + i % 5
        key = f"key-{i}"
        if i % 9 == 0 and jobs:  # the same list again: must be reused, not created
            key = f"key-{i - 1}"
            caller = CALLERS[(i - 1) % len(CALLERS)]
        targets = [NewTarget(f"http://127.0.0.1:9/{i}/{k}", "{}") for k in range(n)]
        now = time.time()
        out = await rec.call(
            store.batch.submit,
            job_id=f"job-{i:05d}",
            caller=caller,
            caller_class="fleet",
            idem_key=key,
            targets=targets,
            now=now,
            ttl=TTL,
            **CAPS,
        )
        if out is None:
            continue
        rec.counts[out.kind] += 1
        if out.kind == "created":
            jobs[out.job.id] = n
            first = first or now
            last = now
            if i % 7 == 0:
                prior = await rec.call(store.batch.cancel, out.job.id, time.time())
                if prior is not None and prior.status in ("queued", "running"):
                    cancelled.append(out.job.id)
        elif out.kind != "reused":
            await asyncio.sleep(0.002)  # caps reached: let the finisher drain
        await rec.call(store.batch.status, f"job-{max(1, i - 3):05d}", results=False)
    return {"jobs": jobs, "cancelled": cancelled, "first": first, "last": last}


async def finisher(store: Store, rec: Recorder, deadline: float, stop_file: Path) -> dict:
    rows = DbView(store.path)
    stored: Counter[str] = Counter()
    terminal: Counter[str] = Counter()
    max_live = 0
    max_per_caller = 0
    first = None
    while True:
        progress = False
        live = await rec.call(store.batch.live_jobs) or []
        max_live = max(max_live, rows.read(batch_sql.count_live))
        for caller in CALLERS:
            per_caller = rows.read(lambda c, caller=caller: batch_sql.count_live(c, caller))
            max_per_caller = max(max_per_caller, per_caller)
        for job_id in live:
            claim = await rec.call(store.batch.claim, job_id, time.time())
            if claim is None:
                continue
            progress = True
            rec.counts["claims"] += 1
            outcome = outcome_for(job_id, claim.idx, claim.busy_since is not None)
            now = time.time()
            if outcome == "busy":
                ok = await rec.call(
                    store.batch.requeue,
                    job_id,
                    claim.idx,
                    retry_at=now + 0.01,
                    busy_since=now,
                    now=now,
                )
                rec.counts["requeued"] += bool(ok)
                continue
            done = outcome == "ok"
            res = await rec.call(
                store.batch.finish,
                job_id,
                claim.idx,
                status="done" if done else "failed",
                outcome=outcome,
                seconds=0.001,
                now=now,
                result=result_for(job_id, claim.idx) if done else None,
                error=None if done else f"{outcome} error",
                hint=None if done else "retry",
            )
            if res is not None and res.stored:
                stored[outcome] += 1
                first = first or now
                if res.terminal:
                    terminal[res.terminal] += 1
        if time.time() >= deadline and stop_file.exists() and not progress and not live:
            break
        if not progress:
            await asyncio.sleep(0.003)
    return {
        "stored": dict(stored),
        "terminal": dict(terminal),
        "max_live": max_live,
        "max_per_caller": max_per_caller,
        "first": first,
    }


async def main(argv: list[str]) -> int:
    role, db_path, start_at, seconds, stop_file = argv
    rec = Recorder()
    report: dict = {"role": role}
    while time.time() < float(start_at):
        time.sleep(0.001)
    store = await rec.call(lambda: asyncio.to_thread(lambda: Store(Database(db_path))))
    if store is not None:
        deadline = float(start_at) + float(seconds)
        if role == "submitter":
            report.update(await submitter(store, rec, deadline))
        else:
            report.update(await finisher(store, rec, deadline, Path(stop_file)))
        store.close()
    report["counts"] = dict(rec.counts)
    report["errors"] = rec.errors
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
