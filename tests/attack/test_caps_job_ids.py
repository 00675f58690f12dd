"""A job id or a list cursor Sift never gave out is the same clear answer on both engines
(docs/API.md §GET /v1/batch): a NUL byte (which PostgreSQL text cannot hold) in a job id is
404 like an unknown id, in a cursor 400, never a 500. Real API processes over loopback, on
SQLite and on a throwaway PostgreSQL.

Bound held: 404 / 400 with the documented error, on both engines.
"""

from __future__ import annotations

import base64

import orjson
import pytest

from tests.e2e.procs import SiftProcs, http

pytestmark = pytest.mark.e2e

IDS = ["%00", "0" * 31 + "%00", "%00" + "a" * 31, "abc%00def"]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def api(request):
    store = {}
    if request.param == "postgres":
        store = {"engine": "postgres", "dsn": request.getfixturevalue("pg_server").fresh_database()}
    procs = SiftProcs([9], store=store)
    procs.start_api()
    yield procs
    procs.close()


@pytest.mark.parametrize("job_id", IDS)
def test_a_job_id_with_a_nul_byte_is_404_on_every_engine(api, job_id):
    key = api.keys["alice"]
    for method, path in (
        ("GET", f"/v1/batch/{job_id}"),
        ("GET", f"/v1/batch/{job_id}?results=false&wait=1"),
        ("DELETE", f"/v1/batch/{job_id}"),
        ("POST", f"/v1/batch/{job_id}/retry"),
    ):
        status, body = http(method, api.base + path, {} if method == "POST" else None, key=key)
        assert (status, body["error"]) == (404, "job not found"), (method, path, body)


def test_a_list_cursor_with_a_nul_byte_is_400_on_every_engine(api):
    for job_id in ("\x00", "a" * 31 + "\x00"):
        raw = orjson.dumps([0, 1.0, job_id])
        cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        status, body = http("GET", api.base + f"/v1/batch?cursor={cursor}", key=api.keys["alice"])
        assert status == 400 and "cursor" in body["error"], body
