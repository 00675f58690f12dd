"""`/v1/batch`: submit, status (with `?wait=` and `?results=`), cancel (SPEC §4.1, §4.4)."""

from __future__ import annotations

import contextlib

from aiohttp import web

from sift import batch
from sift.api.body import read_json
from sift.api.keys import CALLER, CLOCK, CONFIG, NUDGE, PIPELINE, STORE, WAITER
from sift.api.middleware import json_response
from sift.batch.jobs import JOB_NOT_FOUND
from sift.batch.submit import submit_fields
from sift.constants import BATCH_BODY_CAP, WAIT_MAX
from sift.errors import BadRequest, NotFound
from sift.guard import precheck
from sift.store import StoreBusy

routes = web.RouteTableDef()


@routes.post("/v1/batch")
async def submit(request: web.Request) -> web.Response:
    raw_targets, fresh = submit_fields(await read_json(request, BATCH_BODY_CAP, list_ok=True))
    app = request.app
    policy = app[PIPELINE].policy
    done = await batch.submit(
        app[STORE],
        app[CONFIG].batch,
        request[CALLER],
        raw_targets,
        now=app[CLOCK](),
        precheck=lambda url: precheck(url, policy),
        nudge=app[NUDGE],
        fresh=fresh,
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
async def status(request: web.Request) -> web.Response:
    wait, results = _query_options(request)
    app, job_id, caller = request.app, request.match_info["job_id"], request[CALLER]
    view = await batch.read_status(app[STORE], job_id, caller, results=results)
    if view is None:
        raise NotFound(JOB_NOT_FOUND)
    if wait > 0 and not view.terminal:
        await app[WAITER].wait(job_id, wait)
        view = await batch.read_status(app[STORE], job_id, caller, results=results)
        if view is None:
            raise NotFound(JOB_NOT_FOUND)
    now = app[CLOCK]()
    if now - view.job.lease >= 1.0:
        # The lease bump is best-effort: a read that worked is answered even while another
        # process holds the write lock; the next read touches again.
        with contextlib.suppress(StoreBusy):
            await batch.touch(app[STORE], job_id, now)
    return web.Response(body=view.json(), content_type="application/json")


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
