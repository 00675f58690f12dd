"""The worker is SIGKILLed and restarted five times while callers keep submitting (docs/WORKER.md
§Restart semantics, §Store errors): every job ends terminal, none is left `running`, and no finished
result is lost — a target seen `done` with a result keeps exactly that result."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from sift.status import TERMINAL
from tests.e2e.procs import SiftProcs, serve_site, wait_for_job_status, wait_until
from tests.robustness.helpers import (
    LIVE,
    add_callers,
    consistency_problems,
    open_readonly,
    read_jobs,
)

pytestmark = pytest.mark.e2e

KILLS = 5
CALLERS = ("alice", "bob", "spy", "carol")
JOBS_PER_CALLER = 16  # at most, per submitter (a bound; about 6 are used)
TARGETS = 3
PAGE_DELAY = 0.1  # seconds the site takes per page: slow-ish, so kills land mid-job
STREAM_LIMIT = 90.0  # seconds any background loop may run


@pytest.fixture(scope="module")
def slow_site():
    s = serve_site(delay=PAGE_DELAY)
    yield s
    s.close()


class Stream:
    """Submitters (one thread per caller) and an observer that reads every live job by GET."""

    def __init__(self, sift: SiftProcs, site, tag: str):
        self.sift, self.site, self.tag = sift, site, tag
        self.stop = threading.Event()
        self.jobs: dict[str, str] = {}  # job id -> owner
        self.answers: list[tuple[int, object]] = []
        self.results: dict[tuple[str, int], dict] = {}  # first result seen per done target
        self.terminal: dict[str, str] = {}  # first terminal status seen per job
        self.problems: list[str] = []
        self.lock = threading.Lock()
        self.threads = [self._thread(self._submit, who) for who in CALLERS]
        self.threads.append(self._thread(self._observe))

    def _thread(self, fn: Callable, *args) -> threading.Thread:
        t = threading.Thread(target=self._guarded, args=(fn, *args), daemon=True)
        t.start()
        return t

    def _guarded(self, fn: Callable, *args) -> None:
        try:
            fn(*args)
        except Exception as e:  # reported by the test
            with self.lock:
                self.problems.append(f"{fn.__name__}{args}: {e!r}")

    def _submit(self, who: str) -> None:
        deadline = time.monotonic() + STREAM_LIMIT
        for k in range(JOBS_PER_CALLER):
            path = f"?t={self.tag}&c={who}&j={k}"
            urls = [self.site.url(f"/article/{n}{path}") for n in range(TARGETS)]
            while not self.stop.is_set() and time.monotonic() < deadline:
                status, body = self.sift.submit(urls, who=who)
                with self.lock:
                    self.answers.append((status, body))
                if status == 202:
                    with self.lock:
                        self.jobs[body["job_id"]] = who
                    break
                time.sleep(0.1)  # 429: this caller's live jobs are full
            if self.stop.wait(0.05):
                return

    def _observe(self) -> None:
        deadline = time.monotonic() + STREAM_LIMIT
        while time.monotonic() < deadline:
            stopping = self.stop.is_set()
            with self.lock:
                todo = [(j, w) for j, w in self.jobs.items() if j not in self.terminal]
            for job_id, who in todo:
                self.check(self.sift.job(job_id, who=who))
            if stopping:
                return
            time.sleep(0.05)

    def check(self, job: dict) -> None:
        """Record what this read shows; a done result or a terminal status must never change."""
        job_id = job["job_id"]
        with self.lock:
            if job["status"] in TERMINAL:
                first = self.terminal.setdefault(job_id, job["status"])
                if first != job["status"]:
                    self.problems.append(f"job {job_id}: {first} became {job['status']}")
            for t in job["targets"]:
                key = (job_id, t["idx"])
                if key in self.results and t.get("result") != self.results[key]:
                    self.problems.append(f"target {key}: its result changed or vanished")
                if t["status"] == "done":
                    self.results.setdefault(key, t["result"])

    def live_result_seen(self, conn) -> bool:
        """A fetch is in flight, and a live job has a finished target this stream has seen."""
        cur = conn.cursor()
        cur.execute("begin")
        try:
            live = {r[0] for r in cur.execute("select id from batch_job where status = 'running'")}
            running = cur.execute("select 1 from batch_target where status = 'running'").fetchone()
        finally:
            cur.execute("commit")
        with self.lock:
            return bool(running) and any(job_id in live for job_id, _ in self.results)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(STREAM_LIMIT)


def jobs_in(conn, status: str) -> int:
    return count(conn, "select count(*) from batch_job where status = ?", status)


def targets_in(conn, status: str) -> int:
    return count(conn, "select count(*) from batch_target where status = ?", status)


def count(conn, sql: str, *args) -> int:
    return conn.cursor().execute(sql, args).fetchone()[0]


def test_a_worker_killed_five_times_under_submits_loses_no_result_and_strands_no_job(
    slow_site, tag
):
    sift = SiftProcs(
        [slow_site.port],
        batch={"jobs_per_caller": 1, "jobs_total": 16, "targets_per_job": TARGETS},
    )
    add_callers(sift, ["carol"])
    try:
        sift.start()
        conn = open_readonly(sift.state_dir / "sift.db")
        stream = Stream(sift, slow_site, tag)
        killed = []
        for _ in range(KILLS):
            # Each worker completes a job first; then it is killed with a fetch in flight and a
            # live job whose finished target a GET has already shown.
            done = jobs_in(conn, "done")
            wait_until(lambda d=done: jobs_in(conn, "done") > d, timeout=30, what="a job done")
            wait_until(lambda: stream.live_result_seen(conn), timeout=30, what="a result seen")
            killed.append(sift.worker.pid)
            sift.worker.kill()  # SIGKILL by PID
            assert sift.worker.popen.returncode == -9
            sift.start_worker()
        done = jobs_in(conn, "done")  # the last worker drains under the stream for a while
        wait_until(lambda: jobs_in(conn, "done") > done, timeout=30, what="a job done")
        stream.finish()
        assert stream.problems == []
        assert all(s in (202, 429) for s, _ in stream.answers), stream.answers

        # The final, clean run: the last worker drains what is left, then stops on SIGTERM.
        for job_id, who in stream.jobs.items():
            stream.check(wait_for_job_status(sift, job_id, who=who, timeout=60))
        assert sift.worker.stop() == 0
        final = {j: sift.job(j, who=w) for j, w in stream.jobs.items()}
        for job in final.values():
            stream.check(job)
        assert stream.problems == []

        jobs = read_jobs(conn)
        assert set(jobs) == set(stream.jobs)
        assert not [j for j in jobs.values() if j.status in LIVE]
        assert targets_in(conn, "running") == 0
        assert consistency_problems(conn) == []
        outcomes = sorted((j["status"], j["error"], j["targets_done"]) for j in final.values())
        restarted = [j for j in final.values() if j["error"] == "restart"]
        assert len(restarted) >= KILLS, outcomes  # every kill caught a job in flight
        assert all(j["status"] == "failed" for j in restarted)
        assert {j for j, _ in stream.results} & {j["job_id"] for j in restarted}
        assert any(j["status"] == "done" for j in final.values()), outcomes
        for (job_id, idx), result in stream.results.items():
            target = final[job_id]["targets"][idx]
            assert target["status"] == "done" and target["result"] == result
        assert f'sift_batch_jobs_total{{outcome="restart"}} {len(restarted)}.0' in (
            sift.metrics_text()
        )
        assert len(set(killed)) == KILLS
    finally:
        sift.close()
