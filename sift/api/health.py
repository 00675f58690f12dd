"""`/healthz` and `/metrics`: unauthenticated, cheap, and read-only."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from sift.api.appkeys import CLOCK, METRICS, STORE, WORKER
from sift.api.middleware import json_response

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """The API is up; says whether a worker has beaten its heart recently, and how many have:
    on PostgreSQL a second worker with one site to drain looks idle, and the count shows it is
    alive. Answered from the heartbeats a background task reads every second, never from the
    database, so a probe does not wait behind status reads (docs/OPERATIONS.md §Health)."""
    return json_response(request.app[WORKER].health(request.app[CLOCK]()))


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    store = request.app[STORE]
    series = await store.batch_series()
    body = request.app[METRICS].render(
        series, workers_live=await store.worker.live(request.app[CLOCK]())
    )
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
