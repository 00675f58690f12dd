"""Two real OS processes write one fresh database file at once; every count comes out exact.

One process submits (and sometimes cancels) jobs, the other claims, requeues and finishes
their targets, as the API and the worker do. Both open the fresh file at the same instant.
Afterwards every row and counter must match what the processes report, with no lost or doubled
update and no "database is locked" anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from sift.store import batch_sql
from sift.store.series import JOBS_TOTAL, TARGETS_TOTAL
from tests.dbview import DbView
from tests.integration.store_writer import CAPS, outcome_for, result_for

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 3.0


def _spawn(role: str, db: Path, start_at: float, stop_file: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.store_writer",
            role,
            str(db),
            repr(start_at),
            repr(SECONDS),
            str(stop_file),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _report(proc: subprocess.Popen, timeout: float) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    assert "locked" not in err.lower() and "busy" not in err.lower(), err
    return json.loads(out.strip().splitlines()[-1])


def _run_both(tmp_path: Path) -> tuple[dict, dict]:
    db = tmp_path / "sift.db"  # fresh: both children create and migrate it together
    stop_file = tmp_path / "submitter-done"
    start_at = time.time() + 1.5  # after both interpreters have imported sift
    sub = _spawn("submitter", db, start_at, stop_file)
    fin = _spawn("finisher", db, start_at, stop_file)
    try:
        sub_report = _report(sub, timeout=30)
        stop_file.touch()
        fin_report = _report(fin, timeout=30)
    finally:
        for p in (sub, fin):
            if p.poll() is None:
                p.kill()
                p.wait()
    return sub_report, fin_report


def test_two_processes_writing_at_once_lose_and_double_nothing(tmp_path):
    sub, fin = _run_both(tmp_path)
    assert sub["errors"] == [] and "errors" not in sub["counts"], sub["errors"]
    assert fin["errors"] == [] and "errors" not in fin["counts"], fin["errors"]
    assert sub["counts"]["created"] >= 10
    # The processes really overlapped: targets were stored while jobs were still being submitted.
    assert fin["first"] < sub["last"]

    rows = DbView(tmp_path / "sift.db")
    counters = rows.counters()
    jobs = {}
    for job_id in sub["jobs"]:
        status = rows.status(job_id)
        assert status is not None, job_id
        jobs[job_id] = status
    assert rows.read(batch_sql.live_jobs) == []
    assert rows.read(batch_sql.gauges) == (0, 0)
    all_ids = [r[0] for r in rows.all("select id from batch_job")]
    assert sorted(all_ids) == sorted(sub["jobs"])

    finished_total = 0
    by_status: Counter[str] = Counter()
    cancelled = set(sub["cancelled"])
    for job_id, (job, targets) in jobs.items():
        assert job.targets_total == len(targets) == sub["jobs"][job_id]
        finished = [t for t in targets if t.status in ("done", "failed")]
        assert job.targets_done == len(finished), job_id
        assert job.nbytes == sum(len(t.result.encode()) for t in finished if t.result)
        for t in finished:
            outcome = outcome_for(job_id, t.idx, busy_before=True)
            if outcome == "ok":
                assert (t.status, t.result) == ("done", result_for(job_id, t.idx))
            else:
                assert (t.status, t.error, t.result) == ("failed", f"{outcome} error", None)
        finished_total += len(finished)
        by_status[job.status] += 1
        if job_id in cancelled:
            assert job.status == "cancelled"
            continue
        assert len(finished) == len(targets), job_id
        failed = sum(t.status == "failed" for t in targets)
        expected = "failed" if failed == len(targets) else "done" if not failed else "partial"
        assert job.status == expected, job_id

    # Counters: exactly the events each process reported, each once.
    stored = fin["stored"]
    assert finished_total == sum(stored.values())
    for outcome, n in stored.items():
        assert counters[(TARGETS_TOTAL, outcome)] == n
    assert sum(v for (n, _), v in counters.items() if n == TARGETS_TOTAL) == finished_total
    assert counters[(JOBS_TOTAL, "created")] == sub["counts"]["created"] == len(sub["jobs"])
    assert counters.get((JOBS_TOTAL, "reused"), 0) == sub["counts"].get("reused", 0)
    assert counters.get((JOBS_TOTAL, "cancelled"), 0) == len(cancelled)
    assert by_status["cancelled"] == len(cancelled)
    for terminal in ("done", "partial", "failed"):
        assert counters.get((JOBS_TOTAL, terminal), 0) == fin["terminal"].get(terminal, 0)
        assert by_status[terminal] == fin["terminal"].get(terminal, 0)
    assert counters[("sift_batch_target_seconds", "count")] == finished_total
    assert counters[("sift_batch_job_seconds", "count")] == sum(fin["terminal"].values())
    # The caps held under concurrency.
    assert fin["max_live"] <= CAPS["jobs_total"]
    assert fin["max_per_caller"] <= CAPS["jobs_per_caller"]
