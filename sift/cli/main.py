"""Argument parsing for `sift`: the server-side verbs live in `server` (serve, up) and `keys`,
the HTTP client verbs in `fetch` and `batch` (their HTTP calls all in `client`), and `backup` in
`sift.backup`.

Errors are one clear line on stderr and a non-zero exit; the codes are one table for every verb
(`sift.cli.exits`, docs/BATCH.md §Exit codes).
"""

from __future__ import annotations

import argparse
import os
import sys

from sift import about, backup
from sift.cli import advice, batch, client, exits, fetch, keys, mcp, server
from sift.cli.progress import MODES as PROGRESS_MODES
from sift.cli.stdout import note
from sift.fetch.target import MODES

CLIENT_ENV = """environment:
  SIFT_URL   the API's base URL (default http://127.0.0.1:8077)
  SIFT_KEY   your API key (create one with 'sift keys add NAME')"""
SERVER_ENV = """environment:
  SIFT_CONFIG  the config file used when --config is not given (else the built-in defaults)"""
EXIT_CODES = """exit codes: 0 ok (job done or still live), 1 request failed,
  2 usage or setup problem, 3 job partial, 4 job failed, 5 job cancelled,
  130 interrupted, 141 stdout closed"""


def _verb(sub, name: str, help: str, *, env: str, example: str, extra: str = ""):
    epilog = f"{env}\n\nexample:\n  {example}"
    if extra:
        epilog += f"\n\n{extra}"
    return sub.add_parser(
        name,
        help=help,
        description=help[:1].upper() + help[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", metavar="FILE", help="config file (default: $SIFT_CONFIG, else built-in)"
    )


def _result_args(p: argparse.ArgumentParser, *, wait: str) -> None:
    """The options of every verb that shows a job's results; `wait` is --wait's help."""
    p.add_argument("--wait", action="store_true", help=wait)
    p.add_argument(
        "--no-results", action="store_true", help="leave out each done target's result object"
    )
    p.add_argument(
        "--target", type=int, metavar="IDX", help="show only target IDX (0-based, as submitted)"
    )
    p.add_argument(
        "--format",
        choices=("json", "md"),
        default="json",
        help="json: the API's status body (default); md: a heading per target, then its content",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write one file per done target (NN-host.md/.txt/.json) and DIR/index.json",
    )
    p.add_argument(
        "--progress",
        choices=PROGRESS_MODES,
        default="auto",
        help="while waiting, on stderr: auto (a live line on a terminal, else a line per "
        "change), line, plain, json (NDJSON events: one per finished target), none; the line "
        "counts targets finished (ok: fetched, failed: not) and names the slow one",
    )


def _max_age_arg(p: argparse.ArgumentParser, applies: str) -> None:
    p.add_argument(
        "--max-age",
        type=_seconds,
        metavar="SECONDS",
        help=f"the oldest copy from the content cache to accept ({applies}); 0: never from "
        "the cache, always fetched again (default: the server's [cache] ttl, 15 min)",
    )


def _seconds(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sift",
        description="Clean, bounded web content for agents.",
        epilog=f"{CLIENT_ENV}\n\n{EXIT_CODES}\n\nrun 'sift VERB --help' for a verb's options",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"sift {about.version()}")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    serve = _verb(
        sub,
        "serve",
        "run the API process",
        env=SERVER_ENV,
        example="sift serve --config sift.toml --port 8077",
    )
    _config_arg(serve)
    serve.add_argument("--host", help="address to bind (overrides [server] host)")
    serve.add_argument("--port", type=int, help="TCP port (overrides [server] port)")
    serve.set_defaults(run=server.serve)

    up = _verb(
        sub,
        "up",
        "run the API and the worker together; print a first key",
        env=SERVER_ENV,
        example="sift up --config sift.toml",
    )
    _config_arg(up)
    up.set_defaults(run=server.up)

    bk = _verb(
        sub,
        "backup",
        "copy the database while Sift runs (online backup)",
        env=SERVER_ENV,
        example="sift backup /srv/backups/sift-$(date +%F).db --config sift.toml",
    )
    backup.add_arguments(bk)

    _keys_parsers(sub)
    _fetch_parser(sub)
    _batch_parsers(sub)
    mcp.add_parser(sub)
    return p


def _keys_parsers(sub) -> None:
    k = sub.add_parser("keys", help="manage API keys (the running API re-reads the keys file)")
    ksub = k.add_subparsers(dest="keys_verb", required=True, metavar="ACTION")
    add = _verb(
        ksub,
        "add",
        "create a key; prints it once, on the last line",
        env=SERVER_ENV,
        example="sift keys add my-agent --workspace research",
    )
    add.add_argument("name", help="the caller's name: letters, digits, '.', '_' or '-'")
    add.add_argument("--workspace", default="default", help="the caller's workspace")
    add.add_argument(
        "--restricted", action="store_true", help="a restricted caller: its logs are redacted"
    )
    add.add_argument(
        "--rotate", action="store_true", help="a second key for an existing caller (same name)"
    )
    _config_arg(add)
    add.set_defaults(run=keys.add)
    ls = _verb(
        ksub,
        "list",
        "list the keys: name, class, workspace, created (never the key)",
        env=SERVER_ENV,
        example="sift keys list --json",
    )
    ls.add_argument("--json", action="store_true", help="a JSON list instead of a table")
    _config_arg(ls)
    ls.set_defaults(run=keys.list_keys)
    rv = _verb(
        ksub,
        "revoke",
        "remove the key(s) named NAME; the running API refuses them at once",
        env=SERVER_ENV,
        example="sift keys revoke my-agent",
    )
    rv.add_argument("name", help="the name given to 'sift keys add'")
    _config_arg(rv)
    rv.set_defaults(run=keys.revoke)
    ws = _verb(
        ksub,
        "webhook-secret",
        "create or rotate NAME's webhook signing secret; prints it once, on the last line",
        env=SERVER_ENV,
        example="sift keys webhook-secret my-agent",
    )
    ws.add_argument("name", help="the name given to 'sift keys add'")
    _config_arg(ws)
    ws.set_defaults(run=keys.webhook_secret)


def _fetch_parser(sub) -> None:
    f = _verb(
        sub,
        "fetch",
        "fetch one URL and print its content",
        env=CLIENT_ENV,
        example="sift fetch https://example.org/ --question 'Who runs this site?'",
        extra="content goes to stdout; notes (truncated, no grep match) to stderr",
    )
    f.add_argument("url", help="an http(s) URL")
    f.add_argument(
        "--mode",
        choices=MODES,
        help="clean: main content as Markdown (default); markdown: the whole page; text: "
        "plain text; raw: the body as received; links: the page's links",
    )
    f.add_argument("--question", help="return the passages of the page that answer it")
    f.add_argument("--pages", help="PDF pages to return, e.g. 1-3,7")
    f.add_argument("--grep", metavar="REGEX", help="only the lines that match (RE2 syntax)")
    f.add_argument("--jq", metavar="FILTER", help="a jq filter over a JSON response")
    ctx = f.add_mutually_exclusive_group()
    ctx.add_argument(
        "--context",
        dest="context",
        action="store_true",
        default=None,
        help="with --question: also return the passages as a list",
    )
    ctx.add_argument(
        "--no-context", dest="context", action="store_false", help="with --question: do not"
    )
    f.add_argument(
        "--recover",
        action="store_true",
        default=None,
        help="if the page fails (gone, 4xx, 5xx), fetch its closest web-archive copy",
    )
    f.add_argument(
        "--no-links", dest="links", action="store_false", default=None, help="link text only"
    )
    f.add_argument(
        "--no-images", dest="images", action="store_false", default=None, help="leave images out"
    )
    _max_age_arg(f, "never")
    f.add_argument(
        "--accept-verdict",
        dest="accept_verdicts",
        action="append",
        choices=("empty", "soft_404", "bot_wall", "login_wall"),
        default=None,
        help="return the page even when its verdict is this (repeatable)",
    )
    f.add_argument("--json", action="store_true", help="print the whole JSON envelope")
    f.set_defaults(run=fetch.fetch)


def _batch_parsers(sub) -> None:
    b = sub.add_parser("batch", help="asynchronous batch fetch")
    bsub = b.add_subparsers(dest="batch_verb", required=True, metavar="ACTION")
    verbs = (
        _submit_parser,
        _events_parser,
        _status_parser,
        _list_parser,
        _retry_parser,
        _cancel_parser,
    )
    for add in verbs:  # in the order `sift batch --help` lists them
        add(bsub)


def _submit_parser(bsub) -> None:
    submit = _verb(
        bsub,
        "submit",
        "submit up to 32 targets as one job",
        env=CLIENT_ENV,
        example="printf 'https://example.org/a\\nhttps://example.org/b\\n' | sift batch submit -"
        "\n  sift batch submit targets.json --wait --format md",
        extra=EXIT_CODES,
    )
    submit.add_argument(
        "file", help='a JSON list, {"targets": [...]}, or one URL per line; - reads stdin'
    )
    submit.add_argument(
        "--fresh",
        action="store_true",
        help="a new job even if the same list was submitted before (no reuse); its pages may "
        "still come from the content cache: add --max-age 0 to fetch them all again",
    )
    submit.add_argument(
        "--webhook",
        metavar="URL",
        help="deliver the job's terminal event to URL, signed (see docs/API.md §Webhooks)",
    )
    _max_age_arg(submit, "each target without its own max_age")
    _result_args(submit, wait="wait for the job to end, then print its results")
    submit.set_defaults(run=batch.submit)


def _events_parser(bsub) -> None:
    ev = _verb(
        bsub,
        "events",
        "print a job's events as JSON lines until it ends (resumes a dropped stream)",
        env=CLIENT_ENV,
        example="sift batch events JOB_ID | jq -c 'select(.type == \"target.failed\")'",
        extra=EXIT_CODES,
    )
    ev.add_argument("job_id", help="the id 'sift batch submit' printed")
    ev.add_argument(
        "--results", action="store_true", help="include each done target's result in its event"
    )
    ev.set_defaults(run=batch.events)


def _status_parser(bsub) -> None:
    status = _verb(
        bsub,
        "status",
        "print a job's status and results",
        env=CLIENT_ENV,
        example="sift batch status JOB_ID --wait --out results/",
        extra=EXIT_CODES,
    )
    status.add_argument("job_id", help="the id 'sift batch submit' printed")
    _result_args(status, wait="wait until the job ends, showing progress on stderr")
    status.set_defaults(run=batch.status)


def _list_parser(bsub) -> None:
    ls = _verb(
        bsub,
        "list",
        "list your jobs: live ones first, then the most recent",
        env=CLIENT_ENV,
        example="sift batch list --format md",
    )
    ls.add_argument("--limit", type=int, default=20, help="jobs per page, 1 to 100 (default 20)")
    ls.add_argument("--cursor", help="the next_cursor of the previous page")
    ls.add_argument(
        "--format",
        choices=("json", "md"),
        default="json",
        help="json (default) or a md table with the columns finished (ok + failed), ok, "
        "failed and total",
    )
    ls.set_defaults(run=batch.list_jobs)


def _retry_parser(bsub) -> None:
    retry = _verb(
        bsub,
        "retry",
        "submit a new job from the targets of an ended job that did not succeed",
        env=CLIENT_ENV,
        example="sift batch retry JOB_ID --only-retryable --wait",
        extra=EXIT_CODES,
    )
    retry.add_argument("job_id", help="an ended job (done, partial, failed or cancelled)")
    retry.add_argument(
        "--only-retryable",
        action="store_true",
        help="only the failed targets worth trying again (a timeout, not a 404); targets "
        "never fetched are always retried",
    )
    retry.add_argument(
        "--webhook",
        metavar="URL",
        help="deliver the new job's terminal event to URL instead of the old job's webhook "
        "(which it keeps by default)",
    )
    _result_args(retry, wait="wait for the new job to end, then print its results")
    retry.set_defaults(run=batch.retry)


def _cancel_parser(bsub) -> None:
    cancel = _verb(
        bsub,
        "cancel",
        "cancel a live job; finished targets stay readable",
        env=CLIENT_ENV,
        example="sift batch cancel JOB_ID",
    )
    cancel.add_argument("job_id", help="the id 'sift batch submit' printed")
    cancel.set_defaults(run=batch.cancel)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or exits.OK
    except KeyboardInterrupt:
        if sys.stderr.isatty():
            sys.stderr.write("\n")  # end a live progress line
        return exits.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # about the closed stdout when it flushes at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return exits.BROKEN_PIPE
    except client.ClientConfigError as e:
        note(str(e))
        return exits.USAGE
    except client.APIError as e:
        note(advice.error_line(e.error, e.status, e.hint))
        return exits.ERROR
    except (client.ClientError, server.ServerError) as e:
        note(str(e))
        return getattr(e, "exit_code", exits.ERROR)
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
