"""A minimal receiver of Sift's webhooks: verify, de-duplicate, acknowledge.

    pip install aiohttp standardwebhooks
    SIFT_WEBHOOK_SECRET=whsec_... python webhook_receiver.py --port 8099

Every delivery is verified with the `standardwebhooks` library (the signature, and a
timestamp within five minutes); a bad one is answered 401. The `webhook-id` is the same on
every try of one event, so an id already seen is acknowledged without doing the work twice.
Answer 2xx quickly (do slow work after answering): a try that takes longer than the
service's `[batch] webhook_timeout` is tried again later. Answer 410 to stop deliveries.
See docs/API.md §Webhooks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def make_app(secret: str, on_event=print) -> web.Application:
    webhook = Webhook(secret)
    seen: set[str] = set()  # a real receiver keeps this in its database

    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        try:
            event = webhook.verify(body, dict(request.headers))
        except WebhookVerificationError:
            return web.Response(status=401, text="bad signature")
        msg_id = request.headers["webhook-id"]
        if msg_id not in seen:
            seen.add(msg_id)
            on_event(json.dumps(event))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/", receive)
    return app


def main() -> int:
    parser = argparse.ArgumentParser(description="Receive and verify Sift webhooks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    args = parser.parse_args()
    secret = os.environ.get("SIFT_WEBHOOK_SECRET")
    if not secret:
        print("set SIFT_WEBHOOK_SECRET (from 'sift keys webhook-secret NAME')", file=sys.stderr)
        return 2
    web.run_app(make_app(secret), host=args.host, port=args.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
