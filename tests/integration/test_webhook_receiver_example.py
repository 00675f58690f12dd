"""The receiver example (skill/webhook_receiver.py) accepts what Sift signs, once per id, and
refuses a delivery whose body or signature was changed (docs/API.md §Webhooks)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import orjson

from sift.auth import add_key
from sift.batch.wire import event_body
from sift.signing import message_id, rotate_secret, sign
from sift.store import EventRow

EXAMPLE = Path(__file__).resolve().parents[2] / "skill" / "webhook_receiver.py"


def _example():
    spec = importlib.util.spec_from_file_location("webhook_receiver", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_receiver_example_verifies_sifts_signature_once_per_id(aiohttp_client, tmp_path):
    keys = tmp_path / "keys.toml"
    add_key(keys, "alice")
    secret = rotate_secret(keys, "alice")
    assert (tmp_path / "webhook_secrets.toml").stat().st_mode & 0o777 == 0o600
    got: list[str] = []
    client = await aiohttp_client(_example().make_app(secret, on_event=got.append))
    row = EventRow("j" * 32, 4, "job.done", None, time.time(), '{"status":"done"}')
    body = orjson.dumps(event_body(row))
    msg_id, ts = message_id(row.job_id, row.id), int(time.time())
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(ts),
               "webhook-signature": sign(secret, msg_id, ts, body)}  # fmt: skip
    for _ in range(2):
        assert (await client.post("/", data=body, headers=headers)).status == 204
    assert len(got) == 1 and orjson.loads(got[0])["data"]["event_id"] == 4
    tampered = await client.post("/", data=body.replace(b"done", b"fail"), headers=headers)
    assert tampered.status == 401
    rotated = rotate_secret(keys, "alice")
    assert rotated != secret
    stale = {**headers, "webhook-signature": sign(rotated, msg_id, ts, body)}
    assert (await client.post("/", data=body, headers=stale)).status == 401
