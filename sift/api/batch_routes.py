"""`/v1/batch`: submit, list, status (with `?wait=` and `?results=`), retry, cancel
(docs/API.md §POST /v1/batch … §DELETE /v1/batch/{job_id})."""

from __future__ import annotations

from aiohttp import web

from sift import batch
from sift.api.appkeys import (
    CALLER,
    CLOCK,
    CONFIG,
    NUDGE,
    PIPELINE,
    READS,
    STORE,
    WAITER,
    WORKER,
)
from sift.api.body import read_json
from sift.api.middleware import json_response, recheck
from sift.api.webhook_routes import retry_webhook, submit_webhook, webhook_field
from sift.batch.jobs import JOB_ID, JOB_NOT_FOUND
from sift.batch.listing import list_jobs, parse_limit
from sift.batch.retry import retry as retry_job
from sift.batch.retry import retry_fields
from sift.batch.submit import Submitted, submit_fields
from sift.batch.wire import BAD_CURSOR, parse_cursor, worker_fields
from sift.constants import BATCH_BODY_CAP, FETCH_BODY_CAP, WAIT_MAX
from sift.errors import BadRequest, NotFound
from sift.guard import precheck
from sift.status import TERMINAL
from sift.store.rules import expires_at
from sift.timefmt import rfc3339

routes = web.RouteTableDef()


def _job_id(request: web.Request) -> str:
    """The path's job id; one Sift never gives out (a NUL byte, say, which PostgreSQL cannot
    even compare) is the same 404 as an unknown one, on every engine."""
    job_id = request.match_info["job_id"]
    if not JOB_ID.fullmatch(job_id):
        raise NotFound(JOB_NOT_FOUND)
    return job_id


async def _accepted(request: web.Request, done: Submitted) -> web.Response:
    body = done.body() | worker_fields(await request.app[WORKER].up())
    return json_response(body, status=202)


def _precheck(app: web.Application):
    policy = app[PIPELINE].policy
    return lambda url: precheck(url, policy)


@routes.post("/v1/batch")
async def submit(request: web.Request) -> web.Response:
    body = await read_json(request, BATCH_BODY_CAP, list_ok=True)
    raw_targets, fresh = submit_fields(body)
    app = request.app
    webhook = submit_webhook(app, request[CALLER], body)
    done = await batch.submit(
        app[STORE],
        app[CONFIG].batch,
        request[CALLER],
        raw_targets,
        now=app[CLOCK](),
        precheck=_precheck(app),
        nudge=app[NUDGE],
        fresh=fresh,
        webhook=webhook,
    )
    return await _accepted(request, done)


@routes.get("/v1/batch")
async def list_(request: web.Request) -> web.Response:
    unknown = sorted(set(request.query) - {"limit", "cursor"})
    if unknown:
        raise BadRequest(f"unknown query parameter {unknown[0]!r} (known: limit, cursor)")
    app = request.app
    body = await list_jobs(
        app[STORE],
        request[CALLER],
        now=app[CLOCK](),
        ttl=app[CONFIG].batch.ttl,
        limit=parse_limit(request.query.get("limit")),
        cursor=request.query.get("cursor"),
    )
    return json_response(body)


@routes.post("/v1/batch/{job_id}/retry")
async def retry(request: web.Request) -> web.Response:
    body = await read_json(request, FETCH_BODY_CAP) if request.can_read_body else {}
    only_retryable = retry_fields(body)
    app, job_id = request.app, _job_id(request)
    await app[READS].job(job_id, request[CALLER])  # 404 exactly as a status read
    webhook = await retry_webhook(app, request[CALLER], job_id, body)
    done = await retry_job(
        app[STORE],
        app[CONFIG].batch,
        request[CALLER],
        job_id,
        only_retryable=only_retryable,
        now=app[CLOCK](),
        precheck=_precheck(app),
        nudge=app[NUDGE],
        webhook=webhook,
    )
    app[READS].forget(job_id)  # its `retries` changed
    return await _accepted(request, done)


STATUS_QUERY = ("wait", "results", "cursor")


def _query_options(request: web.Request) -> tuple[float, bool, int]:
    unknown = sorted(set(request.query) - set(STATUS_QUERY))
    if unknown:
        raise BadRequest(f"unknown query parameter {unknown[0]!r} (known: wait, results, cursor)")
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
    return wait, raw_results in ("true", "1"), parse_cursor(request.query.get("cursor"))


@routes.get("/v1/batch/{job_id}")
async def status(request: web.Request) -> web.StreamResponse:
    wait, results, first = _query_options(request)
    app, job_id, caller = request.app, _job_id(request), request[CALLER]
    reads = app[READS]
    job = await reads.job(job_id, caller)
    if first and first >= job.targets_total:
        raise BadRequest(BAD_CURSOR)
    if wait > 0 and job.status not in TERMINAL:
        await app[WAITER].wait(job_id, wait)
        recheck(request)
        job = await reads.job(job_id, caller)
    now = app[CLOCK]()
    lease = now if await batch.touch(app[STORE], job, now) else job.lease
    # Per read (not in the shared body): when the job expires and whether a worker runs.
    extra = {"expires_at": rfc3339(expires_at(lease, app[CONFIG].batch.ttl))}
    extra |= worker_fields(await app[WORKER].up())
    extra |= await webhook_field(app[STORE], job_id)
    async with reads.admitted(caller, job, results):
        return await reads.send(request, await reads.body(job, results, first), extra)


@routes.delete("/v1/batch/{job_id}")
async def cancel(request: web.Request) -> web.Response:
    app = request.app
    outcome = await batch.cancel(
        app[STORE],
        _job_id(request),
        request[CALLER],
        now=app[CLOCK](),
        nudge=app[NUDGE].cancelled,
    )
    return json_response(outcome.body())
