"""Webhook secrets and Standard Webhooks signatures (docs/API.md §Webhooks).

Each caller may have one secret (`sift keys webhook-secret NAME` creates or rotates it and
shows it once). Unlike API keys, the service must be able to sign with it, so the secret itself
is stored: in `webhook_secrets.toml` beside the keys file, written atomically with mode 0600
under the keys file's lock, as the keys file is (docs/SECURITY.md §Keys). A delivery is signed
as the Standard Webhooks specification says: `v1,` + base64 of HMAC-SHA256, keyed by the
secret's bytes, over `webhook-id.webhook-timestamp.body`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
import tomllib
from pathlib import Path

import tomli_w

from sift.atomicfile import replace_file, signature
from sift.auth import Caller, KeyRing, KeysError, _lock
from sift.timefmt import rfc3339

PREFIX = "whsec_"
SECRET_BYTES = 32


def secrets_path(keys_file: Path) -> Path:
    return keys_file.parent / "webhook_secrets.toml"


def _load(path: Path) -> list[dict]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise KeysError(f"webhook secrets {path}: cannot read: {e}") from None
    entries = raw.get("secrets", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise KeysError(f"webhook secrets {path}: expected only [[secrets]] entries")
    return entries


def rotate_secret(keys_file: Path, name: str, *, now: float | None = None) -> str:
    """Create (or replace) the webhook secret of the caller named `name` and return it; the
    caller must have a key. Deliveries signed from then on use the new secret."""
    path = secrets_path(keys_file)
    with _lock(keys_file):
        caller = KeyRing.load(keys_file).named(name)
        if caller is None:
            raise KeysError(f"no key named {name!r} in {keys_file} (see 'sift keys list')")
        secret = PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()
        kept = [e for e in _load(path) if _identity(e) != caller.identity]
        kept.append(
            {
                "name": caller.name,
                "workspace": caller.workspace,
                "class": caller.cls,
                "secret": secret,
                "created": rfc3339(time.time() if now is None else now),
            }
        )
        replace_file(path, tomli_w.dumps({"secrets": kept}), 0o600, prefix=".webhook-")
    return secret


def _identity(entry: dict) -> tuple:
    return (entry.get("name"), entry.get("workspace", "default"), entry.get("class"))


class WebhookSecrets:
    """The secrets as a process sees them: re-read whenever the file changes (one `stat` per
    lookup), so a rotation takes effect on the next delivery."""

    def __init__(self, keys_file: Path):
        self.path = secrets_path(keys_file)
        self._seen: tuple | None = None
        self._by_caller: dict[tuple, str] = {}

    def _signature(self) -> tuple | None:
        return signature(self.path)

    def of(self, caller: Caller) -> str | None:
        seen = self._signature()
        if seen != self._seen:
            try:
                self._by_caller = {_identity(e): e["secret"] for e in _load(self.path)}
                self._seen = seen
            except (KeysError, KeyError):
                pass  # the last good secrets stay in force
        return self._by_caller.get(caller.identity)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header value for one delivery."""
    key = base64.b64decode(secret.removeprefix(PREFIX))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def message_id(job_id: str, event_id: int) -> str:
    """The `webhook-id`: one per event, the same on every try and redelivery, so a receiver
    can drop what it has already seen."""
    return f"msg_{job_id}_{event_id}"
