"""A long-poll re-checks its key when the held read returns (docs/SECURITY.md §Auth): a key
revoked while `GET /v1/batch/{id}?wait=` was held gets 401, not the job's results. Real API and
worker processes over loopback.

Bound held: after `sift keys revoke`, no answer with results for that key, held or new.
"""

from __future__ import annotations

import threading
import time

import pytest

from sift.auth import add_key, revoke_key
from tests.e2e.procs import SiftProcs, http, serve_site

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def site():
    s = serve_site()
    yield s
    s.close()


@pytest.fixture(scope="module")
def api(site):
    procs = SiftProcs([site.port])
    procs.keys["erin"] = add_key(procs.state_dir / "keys.toml", "erin")
    with procs:
        yield procs


def test_a_long_poll_held_across_a_revoke_gets_401_not_results(api, site):
    status, job = api.submit([site.held("revoke")], who="erin")
    assert status == 202, job
    answer: list = []
    path = f"/v1/batch/{job['job_id']}?wait=30"
    poll = threading.Thread(
        target=lambda: answer.append(http("GET", api.base + path, key=api.keys["erin"]))
    )
    poll.start()
    try:
        time.sleep(1.0)  # the read is held now
        assert revoke_key(api.state_dir / "keys.toml", "erin") == 1
        site.release("revoke")  # the job ends, which wakes the held read
        poll.join(40)
    finally:
        site.release("revoke")
    status, body = answer[0]
    assert status == 401, body
    assert "results" not in str(body) and "targets" not in body
