"""`GET /v1/batch` and MCP `batch_list` list by the caller's whole identity (docs/API.md
§GET /v1/batch): a caller outside the default workspace sees its jobs, and a name re-created
in another workspace sees none of the old identity's. Real API and worker processes, MCP
through its stdio server.

Bound held: the list shows exactly the asking identity's jobs.
"""

from __future__ import annotations

import pytest

from sift.auth import add_key, revoke_key
from tests.attack.caps_site import HostileSite
from tests.e2e.procs import SiftProcs, wait_for_job_status
from tests.e2e.test_mcp import call, mcp_session

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    site.add("/a", "<html><body><p>a page</p></body></html>")
    yield site
    site.close()


@pytest.fixture(scope="module")
def api(hostile):
    procs = SiftProcs([hostile.port])
    keys = procs.state_dir / "keys.toml"
    procs.keys["carol"] = add_key(keys, "carol", workspace="acme")
    procs.keys["dave"] = add_key(keys, "dave")
    with procs:
        yield procs


def submitted(api, hostile, who: str, tag: str) -> str:
    status, job = api.submit([hostile.url(f"/a?{tag}")], who=who)
    assert status == 202, job
    wait_for_job_status(api, job["job_id"], who=who)
    return job["job_id"]


def listed(api, who: str) -> list[str]:
    status, body = api.call("GET", "/v1/batch?limit=100", who=who)
    assert status == 200, body
    return [j["job_id"] for j in body["jobs"]]


async def mcp_listed(api, who: str) -> list[str]:
    async with mcp_session(api, who) as s:
        result, _ = await call(s, "batch_list", {"limit": 100})
    return [j["job_id"] for j in result.structured_content["jobs"]]


async def test_a_caller_outside_the_default_workspace_lists_its_own_jobs(api, hostile):
    job_id = submitted(api, hostile, "carol", "carol")
    assert listed(api, "carol") == [job_id]
    assert await mcp_listed(api, "carol") == [job_id]
    assert job_id not in listed(api, "alice")


async def test_a_name_recreated_in_another_workspace_lists_none_of_the_old_identitys_jobs(
    api, hostile
):
    old = submitted(api, hostile, "dave", "dave-default")
    assert listed(api, "dave") == [old]
    keys = api.state_dir / "keys.toml"
    revoke_key(keys, "dave")
    api.keys["dave"] = add_key(keys, "dave", workspace="acme")
    assert listed(api, "dave") == []
    assert await mcp_listed(api, "dave") == []
    new = submitted(api, hostile, "dave", "dave-acme")
    assert listed(api, "dave") == [new]
