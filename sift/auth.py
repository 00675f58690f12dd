"""API keys: a TOML keys file of hashes, never the keys themselves.

A caller is `(name, workspace, class)`. The keys file maps each key's SHA-256 to its caller, so
a leaked keys file leaks no key. `add_key` appends a new entry and returns the key once;
`revoke_key` rewrites the file without a name's entries; both hold `keys.toml.lock`, so two
edits at once cannot lose one. The API re-reads the file when it changes (`KeysFile`), so an
edit takes effect on the next request without a restart (docs/SECURITY.md §Auth).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import stat
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w
from filelock import FileLock

from sift.atomicfile import replace_file, signature
from sift.timefmt import rfc3339

log = logging.getLogger("sift.auth")

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


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """What `sift keys list` shows of one key: never the key, nor its hash."""

    name: str
    workspace: str
    cls: str
    created: str | None  # RFC 3339 UTC; None for entries written before it was recorded

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "workspace": self.workspace,
            "class": self.cls,
            "created": self.created,
        }


class KeyRing:
    """Bearer lookup by hash."""

    def __init__(self, by_hash: dict[str, Caller], entries: list[KeyEntry] | None = None):
        self._by_hash = by_hash
        self.entries = entries or []

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
        listed: list[KeyEntry] = []
        for i, e in enumerate(entries):
            where = f"keys file {path}: entry {i + 1}"
            if not isinstance(e, dict):
                raise KeysError(f"{where}: expected a table")
            unknown = set(e) - {"name", "workspace", "class", "sha256", "created"}
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
            created = e.get("created")
            if created is not None and not isinstance(created, str):
                raise KeysError(f"{where}: created must be a string")
            caller = Caller(name, ws, klass)
            other = by_name.setdefault(name, caller)
            if other != caller:
                raise KeysError(
                    f"{where}: name {name!r} is already {_identity(other)}; one name is one caller"
                )
            by_hash[digest] = caller
            listed.append(KeyEntry(name, ws, klass, created))
        return cls(by_hash, listed)

    def named(self, name: str) -> Caller | None:
        return next((c for c in self._by_hash.values() if c.name == name), None)


def _lock(path: Path) -> FileLock:
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path) + ".lock", timeout=10)


def add_key(
    path: Path,
    name: str,
    *,
    workspace: str = "default",
    restricted: bool = False,
    rotate: bool = False,
    now: float | None = None,
) -> str:
    """Append a new key's hash to the keys file (created 0600) and return the key.

    A name is one caller, `(name, workspace, class)`: a name already in the file is refused,
    except with `rotate` for the very same caller (a second key; `revoke_key` then removes
    every key of that name).
    """
    if not _NAME.match(name):
        raise KeysError(f"name {name!r}: use letters, digits, '.', '_' or '-' (max 64)")
    if not _NAME.match(workspace):
        raise KeysError(f"workspace {workspace!r}: use letters, digits, '.', '_' or '-'")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    entry = {
        "name": name,
        "workspace": workspace,
        "class": RESTRICTED if restricted else FLEET,
        "sha256": hash_key(key),
        "created": rfc3339(time.time() if now is None else now),
    }
    with _lock(path):
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
                    f"a key named {name!r} exists; revoke it first ('sift keys revoke {name}'), "
                    "pass --rotate to add a second key for the same caller, or choose another name"
                )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write("\n" + tomli_w.dumps({"keys": [entry]}))
    return key


def _identity(caller: Caller) -> str:
    return f"the {caller.cls} caller of workspace {caller.workspace!r}"


def revoke_key(path: Path, name: str) -> int:
    """Remove every key named `name`; returns how many. The file is replaced atomically and
    keeps its mode."""
    with _lock(path):
        KeyRing.load(path)  # refuse to rewrite a broken file
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raw = {}
        kept = [e for e in raw.get("keys", []) if e.get("name") != name]
        removed = len(raw.get("keys", [])) - len(kept)
        if not removed:
            raise KeysError(f"no key named {name!r} in {path} (see 'sift keys list')")
        mode = stat.S_IMODE(os.stat(path).st_mode)  # an operator may have made it 0644
        replace_file(path, tomli_w.dumps({"keys": kept}) if kept else "", mode, prefix=".keys-")
    return removed


class KeysFile:
    """The API's view of the keys file: re-read whenever the file changes.

    Each lookup compares the file's (inode, size, mtime) with the last read, one `stat` call,
    so `sift keys add` and `revoke` take effect on the next request. A file that cannot be read
    or parsed keeps the last good ring in force, and the reason is logged once per change.
    """

    def __init__(self, path: Path):
        self.path = path
        self.ring = KeyRing.load(path)  # a bad file at start-up is the caller's error
        self._seen = self._signature()

    def _signature(self) -> tuple | None:
        return signature(self.path)

    def current(self) -> KeyRing:
        seen = self._signature()
        if seen != self._seen:
            self._seen = seen
            try:
                self.ring = KeyRing.load(self.path)
                log.info("keys file reloaded", extra={"fields": {"keys": len(self.ring)}})
            except KeysError as e:
                log.warning(
                    "keys file not reloaded; the last good keys stay in force",
                    extra={"fields": {"error": str(e)}},
                )
        return self.ring

    def lookup(self, key: str) -> Caller | None:
        return self.current().lookup(key)

    def __len__(self) -> int:
        return len(self.current())
