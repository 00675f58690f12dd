"""`sift batch submit|status|events|list|retry|cancel` (docs/BATCH.md).

A verb that waits for a job follows it with short long-polls (`?wait=1&results=false`), so its
progress is never more than about a second behind the worker, then reads the results once.
The exit code reports how the job ended (`sift.cli.exits`).
"""

from __future__ import annotations

import argparse
import json
import sys

from sift.cli import advice, client, exits, output
from sift.cli.client import ClientConfigError
from sift.cli.progress import Progress
from sift.cli.stdout import emit, emit_json, for_stream, note
from sift.cli.targets import parse_targets, read_text
from sift.status import TERMINAL

POLL_WAIT = 1.0  # seconds each long-poll of a followed job holds at most


def _note(text: str) -> None:
    note(text)


def _summary(body: dict) -> dict:
    keys = ("job_id", "reused", "status", "targets", "retry_of", "worker", "warning", "note")
    out = {k: body[k] for k in keys if k in body}
    if "note" in out:
        out["note"] = advice.for_people(out["note"], job_id=body.get("job_id"))
    return out


def submit(args: argparse.Namespace) -> int:
    targets = parse_targets(read_text(args.file))
    if args.max_age is not None:
        targets = [
            {**t, "max_age": args.max_age} if isinstance(t, dict) and "max_age" not in t else t
            for t in targets
        ]
    if not targets:
        raise ClientConfigError(f"no targets in {'stdin' if args.file == '-' else args.file}")
    body = client.submit(targets, fresh=args.fresh, webhook=args.webhook)
    return _submitted(body, args)


def events(args: argparse.Namespace) -> int:
    """Each event of the job as one JSON line, until its terminal event; the exit code says
    how the job ended (docs/BATCH.md §Follow the events)."""
    last = None
    for event in client.events(args.job_id, results=args.results):
        emit(json.dumps(event, ensure_ascii=False) + "\n")
        last = event
    if last is None or not last["type"].startswith("job."):
        return exits.OK
    return exits.for_job(last["data"].get("status", ""))


def retry(args: argparse.Namespace) -> int:
    body = client.retry(args.job_id, only_retryable=args.only_retryable, webhook=args.webhook)
    return _submitted(body, args)


def _submitted(body: dict, args: argparse.Namespace) -> int:
    if not args.wait:
        emit_json(_summary(body))
        if body.get("warning"):
            _note(body["warning"])
        return exits.OK
    if args.progress == "json":
        event = {"event": "submitted", **_summary(body)}
        line = for_stream(json.dumps(event, ensure_ascii=False), sys.stderr)
        print(line, file=sys.stderr, flush=True)
    elif args.progress != "none":
        count = advice.plural(body.get("targets", 0), "target")
        _note(f"job {body['job_id']} {body.get('status')}, {count}")
        if body.get("note"):
            _note(advice.for_people(body["note"], job_id=body["job_id"]))
    args.job_id = body["job_id"]
    return _show(args, wait=True)


def status(args: argparse.Namespace) -> int:
    return _show(args, wait=args.wait)


def _show(args: argparse.Namespace, *, wait: bool) -> int:
    results = not args.no_results
    if args.out and not results:
        raise ClientConfigError("--out writes the results; leave out --no-results")
    if wait:
        follow(args.job_id, Progress(args.progress, sys.stderr))
    body = client.job(args.job_id, results=results)
    single = args.target is not None
    if single:
        body = output.select_target(body, args.target)
    if args.out:
        emit_json(output.write_out_dir(body, args.out))
    elif args.format == "md":
        emit(output.as_markdown(body, single=single))
    else:
        emit(output.as_json(body, single=single))
    if not wait and body.get("warning") and args.format == "md":
        _note(body["warning"])
    return exits.for_job(body.get("status", ""))


def follow(job_id: str, progress: Progress) -> dict:
    """Long-poll the job until it ends, reporting each change; returns the last status."""
    while True:
        body = client.job(job_id, wait=POLL_WAIT, results=False)
        if body.get("status") in TERMINAL:
            progress.finish(body)
            return body
        progress.update(body)


def cancel(args: argparse.Namespace) -> int:
    emit_json(client.cancel(args.job_id))
    return exits.OK


def list_jobs(args: argparse.Namespace) -> int:
    body = client.jobs(limit=args.limit, cursor=args.cursor)
    if args.format == "md":
        emit(_jobs_table(body))
    else:
        emit_json(body)
    return exits.OK


def _jobs_table(body: dict) -> str:
    """The same words as the progress line (docs/BATCH.md §Words for counts): `finished` is the
    API's `targets_done`, `ok` the finished targets that did not fail."""
    head = "| job | status | finished | ok | failed | total | created | retry of |"
    rows = [head, "|" + "---|" * 8]
    for j in body.get("jobs", []):
        finished, failed = j["targets_done"], j["targets_failed"]
        rows.append(
            f"| {j['job_id']} | {j['status']} | {finished} | {finished - failed} | {failed} "
            f"| {j['targets_total']} | {j['created_at']} | {j.get('retry_of') or ''} |"
        )
    if body.get("next_cursor"):
        rows.append(f"\nmore: sift batch list --cursor {body['next_cursor']}")
    return "\n".join(rows) + "\n"
