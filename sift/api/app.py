"""The API process's application factory: `create_app(config) -> web.Application`.

The config, the clock and the key ring are plain values set at creation; the database, the
fetch pipeline, the nudge sender and the long-poll waiter are set up in `cleanup_ctx` generators
and torn down after them, so tests build the same app as production.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from aiohttp import web

from sift.api import (
    batch_routes,
    event_stream,
    fetch_routes,
    health,
    openapi_routes,
    webhook_routes,
)
from sift.api.appkeys import (
    CLOCK,
    CONFIG,
    EVENT_READS,
    KEYS,
    METRICS,
    NUDGE,
    PIPELINE,
    RATE,
    READS,
    SECRETS,
    STORE,
    WAITER,
    WORKER,
)
from sift.api.event_reads import SharedReads
from sift.api.middleware import auth, errors
from sift.api.status_reads import StatusReads
from sift.api.waiter import JobWaiter
from sift.api.worker_watch import WorkerWatch
from sift.auth import KeysFile
from sift.batch import waits
from sift.config import Config
from sift.fetch.pipeline import Pipeline
from sift.gates.rate import RequestRate
from sift.metrics import ApiMetrics
from sift.nudge import Nudger
from sift.signing import WebhookSecrets
from sift.store import open_store


def create_app(
    cfg: Config, *, clock: Callable[[], float] = time.time, resolver=None
) -> web.Application:
    """The API app; `resolver` replaces the guard's inner DNS resolver (tests only)."""
    # Request bodies are decoded by `sift.api.body`, so that every Content-Encoding problem
    # (br or zstd, a truncated gzip) is a JSON answer and not aiohttp's plain-text 400.
    app = web.Application(
        middlewares=[errors, auth],
        client_max_size=1024 * 1024,
        handler_args={"auto_decompress": False},
    )
    app[CONFIG] = cfg
    app[CLOCK] = clock
    app[KEYS] = KeysFile(cfg.keys_file)
    app[SECRETS] = WebhookSecrets(cfg.keys_file)
    app[RATE] = RequestRate(cfg.gates.requests_per_second, cfg.gates.request_burst)
    app.cleanup_ctx.append(_store)
    app.cleanup_ctx.append(_pipeline(resolver))
    app.cleanup_ctx.append(_batch)
    app.add_routes(health.routes)
    app.add_routes(fetch_routes.routes)
    app.add_routes(batch_routes.routes)
    app.add_routes(event_stream.routes)
    app.add_routes(webhook_routes.routes)
    app.add_routes(openapi_routes.routes)
    return app


async def _store(app: web.Application):
    store = open_store(app[CONFIG])
    app[STORE] = store
    app[METRICS] = ApiMetrics()
    yield
    await store.aclose()


def _pipeline(resolver):
    async def ctx(app: web.Application):
        pipeline = await Pipeline.open(app[CONFIG], app[STORE], resolver=resolver, clock=app[CLOCK])
        app[PIPELINE] = pipeline
        yield
        await pipeline.close()

    return ctx


async def _batch(app: web.Application):
    app[NUDGE] = Nudger(app[CONFIG].state_dir)
    app[WAITER] = JobWaiter(app[STORE])
    app[WORKER] = WorkerWatch(app[STORE], app[CLOCK])
    await app[WORKER].refresh()  # /healthz answers from a real read from the first request
    watch = asyncio.create_task(app[WORKER].keep_fresh())
    if PIPELINE in app:  # a worker waiting for a gate slot hears when ours free one
        app[PIPELINE].gates.on_release = app[NUDGE].slot_freed
    cfg = app[CONFIG]

    async def explain(job, targets):  # docs/API.md §Waiting targets
        return await waits.wait_fields(
            app[STORE],
            job,
            targets,
            now=app[CLOCK](),
            worker_up=await app[WORKER].up(),
            per_target_max=cfg.fetch.timeout + cfg.render.timeout,
        )

    app[READS] = StatusReads(app[STORE], cfg.server, explain)
    app[EVENT_READS] = SharedReads(app[STORE])
    yield
    watch.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watch
    if PIPELINE in app:
        app[PIPELINE].gates.on_release = None
    await app[WAITER].close()
    app[NUDGE].close()
