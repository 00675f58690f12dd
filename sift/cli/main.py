"""Argument parsing for `sift`: the server-side verbs (serve, up, keys add) live in `server`,
the HTTP client verbs (fetch, batch …) in `client`, and `backup` in `sift.backup`.

Errors are one clear line on stderr and a non-zero exit: 2 for usage and configuration errors,
1 for a failed request.
"""

from __future__ import annotations

import argparse
import sys

from sift import backup
from sift.cli import client, mcp, server
from sift.fetch.target import MODES


def build_parser() -> argparse.ArgumentParser:
    """Every verb and its flags, one declaration each, read top to bottom like `sift --help`
    (long because it is a table, not because it branches)."""
    p = argparse.ArgumentParser(prog="sift", description="Clean, bounded web content for agents.")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    serve = sub.add_parser("serve", help="run the API process")
    serve.add_argument("--config", help="config file (default: $SIFT_CONFIG or built-in)")
    serve.add_argument("--host", help="override [server] host")
    serve.add_argument("--port", type=int, help="override [server] port")
    serve.set_defaults(run=server.serve)

    up = sub.add_parser("up", help="run API and worker together, print a first key")
    up.add_argument("--config", help="config file (default: $SIFT_CONFIG or built-in)")
    up.set_defaults(run=server.up)

    bk = sub.add_parser("backup", help="copy the database while Sift runs (online backup)")
    backup.add_arguments(bk)

    keys = sub.add_parser("keys", help="manage API keys")
    ksub = keys.add_subparsers(dest="keys_verb", required=True, metavar="ACTION")
    add = ksub.add_parser("add", help="create a key; prints it once, on the last line")
    add.add_argument("name")
    add.add_argument("--workspace", default="default")
    add.add_argument("--restricted", action="store_true", help="a restricted (redacted) caller")
    add.add_argument(
        "--rotate", action="store_true", help="a second key for an existing caller (same name)"
    )
    add.add_argument("--config", help="config file (default: $SIFT_CONFIG or built-in)")
    add.set_defaults(run=server.keys_add)

    fetch = sub.add_parser("fetch", help="fetch one URL")
    fetch.add_argument("url")
    fetch.add_argument("--mode", choices=MODES)
    fetch.add_argument("--question")
    fetch.add_argument("--pages")
    fetch.add_argument("--grep")
    fetch.add_argument("--jq")
    ctx = fetch.add_mutually_exclusive_group()
    ctx.add_argument("--context", dest="context", action="store_true", default=None)
    ctx.add_argument("--no-context", dest="context", action="store_false")
    fetch.add_argument("--recover", action="store_true", default=None)
    fetch.add_argument(
        "--no-links", dest="links", action="store_false", default=None, help="link text only"
    )
    fetch.add_argument(
        "--no-images", dest="images", action="store_false", default=None, help="leave images out"
    )
    fetch.add_argument("--json", action="store_true", help="print the whole JSON envelope")
    fetch.set_defaults(run=client.fetch)

    batch = sub.add_parser("batch", help="asynchronous batch fetch")
    bsub = batch.add_subparsers(dest="batch_verb", required=True, metavar="ACTION")
    submit = bsub.add_parser("submit", help="submit targets from FILE (- for stdin)")
    submit.add_argument("file", help='JSON list, {"targets": …}, or one URL per line')
    submit.set_defaults(run=client.batch_submit)
    status = bsub.add_parser("status", help="print a job's status and results")
    status.add_argument("job_id")
    status.add_argument("--wait", action="store_true", help="wait until the job is terminal")
    status.add_argument("--no-results", action="store_true", help="leave out result objects")
    status.set_defaults(run=client.batch_status)
    cancel = bsub.add_parser("cancel", help="cancel a job")
    cancel.add_argument("job_id")
    cancel.set_defaults(run=client.batch_cancel)

    mcp.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        return 130
    except (client.ClientError, server.ServerError) as e:
        print(f"sift: {e}", file=sys.stderr)
        return getattr(e, "exit_code", 1)


if __name__ == "__main__":
    sys.exit(main())
