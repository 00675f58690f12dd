"""Two boxes on one PostgreSQL database (docs/OPERATIONS.md §Running on several boxes): two API
processes and two workers with separate state dirs, started as real processes and killed by
the PIDs the tests started. Skipped, with the reason, when no PostgreSQL server can be had."""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections import Counter

import psycopg
import pytest

from sift.store.pg.batch_sql import WORKER_LOST
from tests.e2e.procs import SiftProcs, serve_site, wait_for_job_status, wait_until

pytestmark = pytest.mark.e2e

DELAY = 0.05  # the site's page delay: a stored fetch took at least this long
DEAD_AFTER = 6.0


@pytest.fixture(scope="module")
def slow_site():
    s = serve_site(delay=DELAY)
    yield s
    s.close()


@pytest.fixture(scope="module")
def boxes(pg_server, slow_site):
    """API boxes A and B (no workers yet), one database, one keys file."""
    dsn = pg_server.fresh_database()
    store = {"engine": "postgres", "dsn": dsn, "worker_dead_after": f"{DEAD_AFTER:g}s"}
    batch = {"jobs_per_caller": 16, "jobs_total": 32, "workers": 1, "poll_interval": "1s"}
    ports = [slow_site.port, slow_site.blocked_port]
    # Room for both workers on the one test host, so the order shows the store's rotation
    # rather than gate retries.
    gates = {"per_host": 4}
    a = SiftProcs(ports, batch=batch, store=store, gates=gates)
    b = SiftProcs(ports, batch=batch, store=store, gates=gates, keys_from=a)
    try:
        a.start_api()
        b.start_api()
        yield a, b, dsn
    finally:
        b.close()
        a.close()


def db_rows(dsn: str, sql: str, *args):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def start_workers(a: SiftProcs, b: SiftProcs, dsn: str):
    wa, wb = a.start_worker(wait=False), b.start_worker(wait=False)
    wait_until(
        lambda: db_rows(dsn, "select count(*) from worker_beat")[0][0] == 2,
        what="both workers beating",
    )
    return wa, wb


def test_a_job_submitted_on_box_a_is_read_long_polled_and_cancelled_on_box_b(boxes, slow_site):
    a, b, _ = boxes
    status, sub = a.submit([slow_site.held("two-box-read"), slow_site.url("/article/1?r")])
    assert status == 202
    job_id = sub["job_id"]
    assert b.job(job_id)["status"] == "queued"  # a status read on the other box
    status, other = a.submit([slow_site.url("/article/2?lp")])
    # Box B long-polls the second job; box A cancels it; B wakes on the notification.
    t0 = time.monotonic()
    answer = {}
    poll = threading.Thread(
        target=lambda: answer.update(b.job(other["job_id"], query="?wait=20")), daemon=True
    )
    poll.start()
    time.sleep(0.3)
    assert a.call("DELETE", f"/v1/batch/{other['job_id']}")[0] == 200
    poll.join(20)
    assert answer["status"] == "cancelled"
    assert time.monotonic() - t0 < 10  # woken, well before the 20 s wait ran out
    # Box B cancels the job box A accepted.
    status, body = b.call("DELETE", f"/v1/batch/{job_id}")
    assert (status, body["status"]) == (200, "cancelled")
    assert a.job(job_id)["status"] == "cancelled"
    slow_site.release("two-box-read")


def test_two_workers_drain_together_serial_per_job_and_round_robin(boxes, slow_site):
    a, b, dsn = boxes
    jobs = []
    for j in range(4):
        box = a if j % 2 == 0 else b
        status, sub = box.submit([slow_site.url(f"/article/{i}?rr{j}-{i}") for i in range(5)])
        assert status == 202
        jobs.append(sub["job_id"])
    start_workers(a, b, dsn)
    for job_id in jobs:
        assert wait_for_job_status(b, job_id, timeout=60)["status"] == "done"

    workers = db_rows(
        dsn, "select count(distinct worker) from batch_target where job_id = any(%s)", jobs
    )
    assert workers[0][0] == 2  # both workers fetched targets
    hits = [(t, p.split("?rr", 1)[1]) for t, p in slow_site.hit_at if "?rr" in p]
    order = [tuple(map(int, tag.split("-"))) for _, tag in hits]
    for j in range(4):
        mine = [(t, i) for (t, tag), (jj, i) in zip(hits, order, strict=True) if jj == j]
        assert [i for _, i in mine] == list(range(5))  # in idx order, each fetched once
        gaps = [t2 - t1 for (t1, _), (t2, _) in itertools.pairwise(mine)]
        assert min(gaps) >= DELAY  # serial: the next starts after the previous was fetched
    served = Counter()
    # Round robin per worker (docs/WORKER.md §Several workers): each worker keeps its own turns
    # and passes over a job the other is serving, so each may put a job up to 2 ahead.
    for j, _ in order:
        served[j] += 1
        assert max(served.values()) - min(served.get(k, 0) for k in range(4)) <= 4, order


def test_one_api_start_logs_one_migration_line_per_database(boxes):
    """docs/OPERATIONS.md §Upgrades: the shared schema and the box's cache file, once each."""
    a, b, _ = boxes
    for box, expected in ((a, 1), (b, 0)):  # b found the shared schema already migrated
        msgs = [ln["msg"] for ln in box.api.json_lines() if "migrated" in ln.get("msg", "")]
        pg = [m for m in msgs if m.startswith("store: postgres schema migrated from version 0")]
        local = [m for m in msgs if m.startswith(f"store: {box.state_dir}/sift.db migrated")]
        assert (len(pg), len(local), len(msgs)) == (expected, 1, expected + 1), msgs


def test_health_and_metrics_count_the_live_workers_of_every_box(boxes):
    """docs/OPERATIONS.md §Health: a second worker that looks idle is seen to be alive."""
    a, b, dsn = boxes
    if db_rows(dsn, "select count(*) from worker_beat")[0][0] < 2:
        start_workers(a, b, dsn)
    wait_until(
        lambda: a.health()["workers"]["live"] == b.health()["workers"]["live"] == 2,
        what="both boxes counting two live workers",
    )
    assert "\nsift_workers_live 2.0\n" in a.metrics_text()


def test_a_killed_worker_fails_only_its_in_flight_target_once_silent(boxes, slow_site):
    a, b, dsn = boxes
    if len(db_rows(dsn, "select id from worker_beat")) < 2:
        start_workers(a, b, dsn)
    status, held = a.submit(
        [slow_site.held("two-box-kill"), *[slow_site.url(f"/article/{i}?k{i}") for i in (1, 2)]]
    )
    assert status == 202
    status, other = b.submit([slow_site.url(f"/article/{i}?o{i}") for i in range(6)])
    job_id = held["job_id"]
    wait_until(
        lambda: db_rows(
            dsn,
            "select worker from batch_target where job_id = %s and idx = 0 and status = 'running'",
            job_id,
        ),
        what="the held target in flight",
    )
    worker_id = db_rows(
        dsn, "select worker from batch_target where job_id = %s and idx = 0", job_id
    )
    pid = int(worker_id[0][0].split(":")[1])
    victim = next(p for p in a.procs + b.procs if p.pid == pid and p.name == "worker")
    survivor = next(p for p in a.procs + b.procs if p.name == "worker" and p is not victim)
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    # Until dead_after passes the target stays in flight: a pause is not a death.
    assert b.job(job_id)["targets"][0]["status"] == "running"

    job = wait_for_job_status(b, job_id, timeout=DEAD_AFTER + 30)
    assert [t["status"] for t in job["targets"]] == ["failed", "done", "done"]
    assert job["targets"][0]["error"] == WORKER_LOST
    assert job["status"] == "partial"
    assert wait_for_job_status(a, other["job_id"], timeout=30)["status"] == "done"
    assert survivor.alive()
    slow_site.release("two-box-kill")
