"""`sift keys add|list|revoke|webhook-secret`: edit the keys file the API reads (it re-reads
it on change), and the webhook secrets beside it.

Without `--config` they use the same config as `sift serve` ($SIFT_CONFIG, else the embedded
defaults, whose keys file is `var/keys.toml` under the current folder), and they print the
keys file's path, so a key never lands in a file the server does not read.
"""

from __future__ import annotations

import argparse
import os
import sys

from sift import config as configmod
from sift.auth import KeyRing, KeysError, add_key, revoke_key
from sift.cli.server import ServerError, load_config
from sift.cli.stdout import emit_json
from sift.signing import rotate_secret, secrets_path


def _config(args: argparse.Namespace) -> configmod.Config:
    cfg = load_config(args.config)
    source = args.config or os.environ.get("SIFT_CONFIG") or "the built-in defaults"
    print(f"sift: keys file {cfg.keys_file} (config: {source})", file=sys.stderr)
    return cfg


def add(args: argparse.Namespace) -> int:
    cfg = _config(args)
    try:
        key = add_key(
            cfg.keys_file,
            args.name,
            workspace=args.workspace,
            restricted=args.restricted,
            rotate=args.rotate,
        )
    except KeysError as e:
        raise ServerError(str(e)) from None
    kind = "restricted" if args.restricted else "fleet"
    print(
        f"added {kind} key for {args.name} (workspace {args.workspace}) to {cfg.keys_file}; "
        "a running API accepts it from its next request"
    )
    print(key)
    return 0


def list_keys(args: argparse.Namespace) -> int:
    cfg = _config(args)
    try:
        entries = KeyRing.load(cfg.keys_file).entries
    except KeysError as e:
        raise ServerError(str(e)) from None
    if args.json:
        emit_json([e.as_dict() for e in entries])
        return 0
    rows = [("NAME", "CLASS", "WORKSPACE", "CREATED")]
    rows += [(e.name, e.cls, e.workspace, e.created or "-") for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
    return 0


def revoke(args: argparse.Namespace) -> int:
    cfg = _config(args)
    try:
        removed = revoke_key(cfg.keys_file, args.name)
    except KeysError as e:
        raise ServerError(str(e)) from None
    print(
        f"revoked {removed} key(s) named {args.name} in {cfg.keys_file}; "
        "a running API refuses them from its next request"
    )
    return 0


def webhook_secret(args: argparse.Namespace) -> int:
    cfg = _config(args)
    try:
        secret = rotate_secret(cfg.keys_file, args.name)
    except KeysError as e:
        raise ServerError(str(e)) from None
    print(
        f"webhook secret of {args.name} set in {secrets_path(cfg.keys_file)}; deliveries are "
        "signed with it from now on (the previous one, if any, no longer verifies)"
    )
    print(secret)
    return 0
