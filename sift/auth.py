"""API keys: a TOML keys file of hashes, never the keys themselves.

A caller is `(name, workspace, class)`. The keys file maps each key's SHA-256 to its caller, so
a leaked keys file leaks no key. `add_key` appends a new entry and returns the key once.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

FLEET = "fleet"
RESTRICTED = "restricted"
CLASSES = (FLEET, RESTRICTED)
KEY_PREFIX = "sk-sift-"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class KeysError(Exception):
    """The keys file is not valid; the message says where."""


@dataclass(frozen=True, slots=True)
class Caller:
    name: str
    workspace: str = "default"
    cls: str = FLEET

    @property
    def restricted(self) -> bool:
        return self.cls == RESTRICTED

    @property
    def identity(self) -> tuple[str, str, str]:
        """Who the caller is, everywhere: ownership, reuse, caps, budgets, render shares."""
        return (self.name, self.workspace, self.cls)

    @property
    def owner(self) -> str:
        """The caller as its jobs record it, with its class beside: the name alone in the
        default workspace (as jobs stored before workspaces counted), else `workspace/name`."""
        return self.name if self.workspace == "default" else f"{self.workspace}/{self.name}"

    @classmethod
    def from_owner(cls, owner: str, klass: str) -> Caller:
        workspace, _, name = owner.rpartition("/")
        return cls(name, workspace or "default", klass)

    @property
    def cache_partition(self) -> str:
        """The caches' partition: fleet callers share one; each restricted caller has its own,
        so none of them learns what another fetched (not even through `cached: true`)."""
        if self.cls == RESTRICTED:
            return f"{RESTRICTED}:{self.workspace}:{self.name}"
        return self.cls


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyRing:
    """Bearer lookup by hash."""

    def __init__(self, by_hash: dict[str, Caller]):
        self._by_hash = by_hash

    def __len__(self) -> int:
        return len(self._by_hash)

    def lookup(self, key: str) -> Caller | None:
        # The lookup is keyed by the key's hash, so its timing reveals nothing about the key.
        # Keys are ASCII; a header with other bytes (kept by aiohttp as surrogates) is no key.
        if not key.isascii():
            return None
        return self._by_hash.get(hash_key(key))

    @classmethod
    def load(cls, path: Path) -> KeyRing:
        """Read the keys file; a missing file is an empty ring, a bad one a KeysError."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls({})
        except OSError as e:
            raise KeysError(f"keys file {path}: cannot read: {e.strerror}") from None
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise KeysError(f"keys file {path}: not valid TOML: {e}") from None
        entries = raw.get("keys", [])
        if set(raw) - {"keys"} or not isinstance(entries, list):
            raise KeysError(f"keys file {path}: expected only [[keys]] entries")
        by_hash: dict[str, Caller] = {}
        by_name: dict[str, Caller] = {}
        for i, e in enumerate(entries):
            where = f"keys file {path}: entry {i + 1}"
            if not isinstance(e, dict):
                raise KeysError(f"{where}: expected a table")
            unknown = set(e) - {"name", "workspace", "class", "sha256"}
            if unknown:
                raise KeysError(f"{where}: unknown key {sorted(unknown)[0]!r}")
            name, ws, klass, digest = (e.get(k) for k in ("name", "workspace", "class", "sha256"))
            if not isinstance(name, str) or not _NAME.match(name):
                raise KeysError(f"{where}: name must be letters, digits, '.', '_' or '-'")
            if ws is None:
                ws = "default"
            if not isinstance(ws, str) or not _NAME.match(ws):
                raise KeysError(f"{where}: workspace must be letters, digits, '.', '_' or '-'")
            if klass not in CLASSES:
                raise KeysError(f"{where}: class must be 'fleet' or 'restricted'")
            if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise KeysError(f"{where}: sha256 must be 64 lowercase hex digits")
            caller = Caller(name, ws, klass)
            other = by_name.setdefault(name, caller)
            if other != caller:
                raise KeysError(
                    f"{where}: name {name!r} is already {_identity(other)}; one name is one caller"
                )
            by_hash[digest] = caller
        return cls(by_hash)

    def named(self, name: str) -> Caller | None:
        return next((c for c in self._by_hash.values() if c.name == name), None)


def add_key(
    path: Path,
    name: str,
    *,
    workspace: str = "default",
    restricted: bool = False,
    rotate: bool = False,
) -> str:
    """Append a new key's hash to the keys file (created 0600) and return the key.

    A name is one caller, `(name, workspace, class)`: a name already in the file is refused,
    except with `rotate` for the very same caller (a second key, to retire the first later).
    """
    if not _NAME.match(name):
        raise KeysError(f"name {name!r}: use letters, digits, '.', '_' or '-' (max 64)")
    if not _NAME.match(workspace):
        raise KeysError(f"workspace {workspace!r}: use letters, digits, '.', '_' or '-'")
    existing = KeyRing.load(path).named(name)  # also refuses to append to a broken file
    if existing is not None:
        wanted = Caller(name, workspace, RESTRICTED if restricted else FLEET)
        if existing != wanted:
            raise KeysError(
                f"name {name!r} is already {_identity(existing)}; one name is one caller: "
                "choose another name"
            )
        if not rotate:
            raise KeysError(
                f"name {name!r} already has a key; pass --rotate to add a second key for the "
                "same caller"
            )
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    entry = {
        "name": name,
        "workspace": workspace,
        "class": RESTRICTED if restricted else FLEET,
        "sha256": hash_key(key),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write("\n" + tomli_w.dumps({"keys": [entry]}))
    return key


def _identity(caller: Caller) -> str:
    return f"the {caller.cls} caller of workspace {caller.workspace!r}"
