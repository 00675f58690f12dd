"""Many submits at the same moment against the real API process (docs/WORKER.md §The store's
transactions): the idempotency lookup, the caps and the insert are one write transaction, so a race
can neither create a second job for the same list nor exceed a cap.

Only the API runs here: the jobs stay `queued`, so no job can finish (and free a cap) while
the burst is answered.
"""

from __future__ import annotations

import pytest

from tests.robustness.helpers import add_callers, at_once, open_readonly, read_jobs, submit_call

pytestmark = pytest.mark.e2e

CLIENTS = 20


def test_twenty_clients_submitting_the_same_list_at_once_get_one_job_and_nineteen_reuses(
    fresh, site, tag
):
    sift = fresh(start=False)
    sift.start_api()
    urls = [site.url(f"/article/{i}?t={tag}") for i in range(5)]
    answers = at_once([submit_call(sift, urls, "alice") for _ in range(CLIENTS)])

    assert [a.status for a in answers] == [202] * CLIENTS, [a.body for a in answers]
    assert sorted(a.body["reused"] for a in answers) == [False] + [True] * (CLIENTS - 1)
    assert len({a.body["job_id"] for a in answers}) == 1
    assert all(a.body["targets"] == len(urls) for a in answers)
    jobs = read_jobs(open_readonly(sift.state_dir / "sift.db"))
    assert list(jobs) == [answers[0].body["job_id"]]
    assert 'sift_batch_jobs_total{outcome="reused"} 19.0' in sift.metrics_text()


def test_twenty_callers_submitting_at_once_with_jobs_total_8_get_8_jobs_and_12_429s(
    fresh, site, tag
):
    sift = fresh(start=False, batch={"jobs_total": 8})
    callers = [f"caller{i:02d}" for i in range(CLIENTS)]
    add_callers(sift, callers)
    sift.start_api()
    urls = [site.url(f"/article/1?t={tag}")]  # the same list: each caller's key differs
    answers = at_once([submit_call(sift, urls, who) for who in callers])

    created = [a for a in answers if a.status == 202]
    busy = [a for a in answers if a.status == 429]
    assert (len(created), len(busy)) == (8, 12), [(a.status, a.body) for a in answers]
    assert all(a.body["reused"] is False for a in created)
    assert len({a.body["job_id"] for a in created}) == 8
    for a in busy:
        assert a.body["success"] is False and a.body["hint"] == "retry"
        assert a.body["error"].startswith("jobs busy")
    jobs = read_jobs(open_readonly(sift.state_dir / "sift.db"))
    assert sorted(jobs) == sorted(a.body["job_id"] for a in created)
    assert len({j.caller for j in jobs.values()}) == 8
    assert all(j.status == "queued" for j in jobs.values())
