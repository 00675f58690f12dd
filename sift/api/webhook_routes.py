"""Webhooks on the API side (docs/API.md §Webhooks): the submit's `webhook` field, the
`webhook` field of a status read, and `POST /v1/batch/{job_id}/webhook/redeliver`."""

from __future__ import annotations

from aiohttp import web

from sift.api.appkeys import CALLER, CLOCK, NUDGE, PIPELINE, READS, SECRETS, STORE
from sift.api.middleware import json_response
from sift.auth import Caller
from sift.batch.webhook import parse_webhook
from sift.errors import Conflict, Unprocessable
from sift.guard import precheck
from sift.store import Store
from sift.timefmt import rfc3339

routes = web.RouteTableDef()

NO_SECRET = (
    "webhook: this caller has no webhook secret to sign deliveries with; the operator creates "
    "one with 'sift keys webhook-secret NAME'"
)


def submit_webhook(app: web.Application, caller: Caller, body) -> tuple | None:
    """The submit's webhook, checked: its URL passes the guard's pre-check (the sender checks
    every delivery's address again), and the caller has a secret to sign with."""
    if not isinstance(body, dict):
        return None
    policy = app[PIPELINE].policy
    webhook = parse_webhook(body.get("webhook"), lambda url: precheck(url, policy))
    if webhook is not None and app[SECRETS].of(caller) is None:
        raise Unprocessable(NO_SECRET)
    return webhook


async def retry_webhook(app: web.Application, caller: Caller, job_id: str, body) -> tuple | None:
    """A retry's webhook: the body's `webhook` when it has the field (`null`: none), else the
    old job's, checked again as a submit's would be (the guard or the secret may have changed
    since). Called after the caller's ownership of `job_id` is known."""
    if isinstance(body, dict) and "webhook" in body:
        return submit_webhook(app, caller, body)
    spec = await app[STORE].webhooks.spec(job_id)
    if spec is None:
        return None
    url, kinds, results = spec
    return submit_webhook(
        app, caller, {"webhook": {"url": url, "events": list(kinds), "results": results}}
    )


async def webhook_field(store: Store, job_id: str) -> dict:
    """`{"webhook": {state, attempts, last_status, next_try, deliveries}}` for a job that has
    deliveries, else nothing."""
    state = await store.webhooks.state(job_id)
    if state is None:
        return {}
    if state["next_try"] is not None:
        state["next_try"] = rfc3339(state["next_try"])
    return {"webhook": state}


@routes.post("/v1/batch/{job_id}/webhook/redeliver")
async def redeliver(request: web.Request) -> web.Response:
    app, job_id = request.app, request.match_info["job_id"]
    await app[READS].job(job_id, request[CALLER])  # 404 exactly as a status read
    n = await app[STORE].webhooks.redeliver(job_id, app[CLOCK]())
    if n is None:
        raise Conflict("this job has no webhook")
    if n and NUDGE in app:  # the worker's sender takes them now (docs/WORKER.md §Webhook sender)
        app[NUDGE].hooks()
    return json_response({"success": True, "redelivering": n}, status=202)
