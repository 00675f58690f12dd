"""`POST /v1/fetch`: the interactive fetch, served by the API process itself."""

from __future__ import annotations

import time

from aiohttp import web

from sift.api.appkeys import CALLER, METRICS, PIPELINE
from sift.api.body import read_json
from sift.api.middleware import json_response
from sift.constants import FETCH_BODY_CAP
from sift.errors import SiftError
from sift.fetch.target import parse_target

routes = web.RouteTableDef()


@routes.post("/v1/fetch")
async def fetch(request: web.Request) -> web.Response:
    metrics = request.app[METRICS]
    started = time.perf_counter()
    try:
        target = parse_target(await read_json(request, FETCH_BODY_CAP))
        envelope = await request.app[PIPELINE].fetch_target(request[CALLER], target)
    except SiftError as e:
        metrics.observe_fetch(e.outcome or "invalid", time.perf_counter() - started)
        raise
    metrics.observe_fetch("ok", time.perf_counter() - started, cached=envelope["cached"])
    return json_response(envelope)
