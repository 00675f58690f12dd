"""`/v1/batch`: submit, status (with `?wait=` and `?results=`), cancel (docs/API.md §POST /v1/batch,
§GET /v1/batch/{job_id}, §DELETE /v1/batch/{job_id})."""

from __future__ import annotations

from aiohttp import web

from sift import batch
from sift.api.appkeys import CALLER, CLOCK, CONFIG, NUDGE, PIPELINE, READS, STORE, WAITER
from sift.api.body import read_json
from sift.api.middleware import json_response
from sift.constants import BATCH_BODY_CAP, WAIT_MAX
from sift.errors import BadRequest
from sift.guard import precheck
from sift.status import TERMINAL

routes = web.RouteTableDef()


@routes.post("/v1/batch")
async def submit(request: web.Request) -> web.Response:
    body = await read_json(request, BATCH_BODY_CAP)
    unknown = sorted(set(body) - {"targets"})
    if unknown:
        raise BadRequest(f'unknown field {unknown[0]!r}; expected {{"targets": [...]}}')
    if "targets" not in body:
        raise BadRequest('"targets" is required: a list of target objects')
    app = request.app
    policy = app[PIPELINE].policy
    done = await batch.submit(
        app[STORE],
        app[CONFIG].batch,
        request[CALLER],
        body["targets"],
        now=app[CLOCK](),
        precheck=lambda url: precheck(url, policy),
        nudge=app[NUDGE],
    )
    return json_response(done.body(), status=202)


def _query_options(request: web.Request) -> tuple[float, bool]:
    raw_wait = request.query.get("wait", "0")
    try:
        wait = float(raw_wait)
    except ValueError:
        raise BadRequest(f"wait must be a number of seconds from 0 to {WAIT_MAX:g}") from None
    if not 0 <= wait <= WAIT_MAX:
        raise BadRequest(f"wait must be a number of seconds from 0 to {WAIT_MAX:g}")
    raw_results = request.query.get("results", "true").lower()
    if raw_results not in ("true", "false", "1", "0"):
        raise BadRequest("results must be true or false")
    return wait, raw_results in ("true", "1")


@routes.get("/v1/batch/{job_id}")
async def status(request: web.Request) -> web.StreamResponse:
    wait, results = _query_options(request)
    app, job_id, caller = request.app, request.match_info["job_id"], request[CALLER]
    reads = app[READS]
    job = await reads.job(job_id, caller)
    if wait > 0 and job.status not in TERMINAL:
        await app[WAITER].wait(job_id, wait)
        job = await reads.job(job_id, caller)
    await batch.touch(app[STORE], job, app[CLOCK]())
    async with reads.admitted(caller, job, results):
        return await reads.send(request, await reads.body(job, results))


@routes.delete("/v1/batch/{job_id}")
async def cancel(request: web.Request) -> web.Response:
    app = request.app
    outcome = await batch.cancel(
        app[STORE],
        request.match_info["job_id"],
        request[CALLER],
        now=app[CLOCK](),
        nudge=app[NUDGE],
    )
    return json_response(outcome.body())
