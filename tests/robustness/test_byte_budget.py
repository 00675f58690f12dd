"""The batch byte budget under full caps (docs/API.md §Job lifetime): 8 live jobs of 32
targets with results near the output cap, and older finished jobs that must make room.

The numbers make the rule satisfiable and the eviction necessary: the live jobs' results,
complete, fit in `max_bytes`; together with the finished jobs stored first they do not. A
read-only connection samples every committed state while the worker drains.
"""

from __future__ import annotations

import pytest

from tests.e2e.procs import wait_for_job_status
from tests.robustness.helpers import LIVE, Sampler, configure, open_readonly, read_jobs

pytestmark = pytest.mark.e2e

CAP = 8000  # [fetch] output_cap, characters (the raw page is ~18 KB of ASCII)
RESULT_MAX = CAP + 600  # bytes: a capped result with its envelope, at most
JOBS, TARGETS = 8, 32  # full caps: jobs_total and targets_per_job
OLD_JOBS = 4  # finished jobs stored before the live ones (~half the budget)
MAX_BYTES = JOBS * TARGETS * RESULT_MAX


def targets(site, tag, job: str) -> list[dict]:
    return [
        {"url": site.url(f"/big?words=2000&t={tag}&j={job}&i={i:02d}"), "mode": "raw"}
        for i in range(TARGETS)
    ]


def test_batch_bytes_stay_within_max_bytes_after_every_stored_target_and_no_live_job_is_evicted(
    fresh, site, tag
):
    sift = fresh(
        start=False,
        fetch={"output_cap": CAP},
        batch={"jobs_per_caller": JOBS, "jobs_total": JOBS, "targets_per_job": TARGETS},
    )
    configure(sift, batch={"max_bytes": MAX_BYTES})
    sift.start()
    db = sift.state_dir / "sift.db"

    old = []
    for n in range(OLD_JOBS):
        _, sub = sift.submit(targets(site, tag, f"old{n}"))
        assert wait_for_job_status(sift, sub["job_id"])["status"] == "done"
        old.append(sub["job_id"])
    stored = read_jobs(open_readonly(db))
    assert set(stored) == set(old)  # nothing evicted yet
    per_target = [j.nbytes / TARGETS for j in stored.values()]
    assert all(CAP <= b <= RESULT_MAX for b in per_target), per_target  # near the cap
    assert sum(j.nbytes for j in stored.values()) + JOBS * TARGETS * min(per_target) > MAX_BYTES

    with Sampler(db) as sampler:
        live = []
        for n in range(JOBS):
            status, sub = sift.submit(targets(site, tag, f"live{n}"))
            assert status == 202, sub
            live.append(sub["job_id"])
        finished = [wait_for_job_status(sift, job_id, timeout=60) for job_id in live]
    samples = sampler.samples
    assert len(samples) > JOBS * TARGETS // 4, len(samples)  # the drain was watched closely

    over = [s for s in samples if s.nbytes > MAX_BYTES]
    assert over == [], f"{len(over)} committed states over max_bytes {MAX_BYTES}: {over[:1]}"
    # Every old job made room, oldest lease first; no job ever seen live disappeared.
    seen_live: set[str] = set()
    by_lease = sorted(old, key=lambda j: stored[j].lease)
    for s in samples:
        assert seen_live <= set(s.jobs), seen_live - set(s.jobs)
        seen_live |= {j.id for j in s.jobs.values() if j.status in LIVE}
        left = [j for j in by_lease if j in s.jobs]
        assert left == by_lease[len(by_lease) - len(left) :], left
    assert not set(old) & set(samples[-1].jobs)
    for job_id in old:
        assert sift.call("GET", f"/v1/batch/{job_id}")[0] == 404
    assert set(live) <= seen_live
    for job in finished:
        assert job["status"] == "done" and job["targets_done"] == TARGETS
        assert all(t["result"]["truncated"] for t in job["targets"])
    assert read_jobs(open_readonly(db)).keys() == set(live)


def test_one_caller_filling_the_budget_evicts_its_own_oldest_jobs_not_another_callers(
    fresh, site, tag
):
    """docs/WORKER.md §Byte budget: the submitter pays first; a caller within an equal share
    keeps its results."""
    sift = fresh(start=False)
    configure(sift, batch={"max_bytes": "1MiB"}, fetch={"output_cap": 100_000})
    sift.start()

    def big_job(who: str, job: str, n: int) -> str:
        urls = [site.url(f"/big?words=20000&t={tag}&j={job}&i={i}") for i in range(n)]
        status, body = sift.submit(urls, who=who)
        assert status == 202, body
        done = wait_for_job_status(sift, body["job_id"], who=who, timeout=60)
        assert done["status"] == "done", done
        return body["job_id"]

    bobs = big_job("bob", "bob", 2)
    alices = [big_job("alice", f"a{k}", 4) for k in range(4)]
    status, body = sift.call("GET", f"/v1/batch/{bobs}", who="bob")
    assert status == 200 and body["targets_done"] == 2, body
    status, _ = sift.call("GET", f"/v1/batch/{alices[0]}", who="alice")
    assert status == 404  # alice's oldest job made room for her newest
    status, body = sift.call("GET", f"/v1/batch/{alices[-1]}", who="alice")
    assert status == 200 and body["targets_done"] == 4
