"""Client verbs: `sift fetch` and `sift batch submit|status|cancel`, over HTTP to SIFT_URL.

They use the standard library's HTTP client with proxies switched off, so the CLI has no
start-up cost beyond Python itself.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from sift.constants import DEFAULT_URL
from sift.status import TERMINAL


class ClientError(Exception):
    """A request failed; the message is the server's error line."""

    exit_code = 1


class ClientConfigError(ClientError):
    """SIFT_URL or SIFT_KEY is missing or unusable."""

    exit_code = 2


def _endpoint() -> tuple[str, str]:
    url = os.environ.get("SIFT_URL") or DEFAULT_URL
    key = os.environ.get("SIFT_KEY", "")
    if not key:
        raise ClientConfigError("SIFT_KEY is not set (create a key with 'sift keys add NAME')")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ClientConfigError(f"SIFT_URL {url!r} is not an http(s) URL such as {DEFAULT_URL}")
    return url.rstrip("/"), key


def _job_path(job_id: str) -> str:
    """The job's path, its id quoted so that no character can change the request's route."""
    return "/v1/batch/" + urllib.parse.quote(job_id, safe="")


def request(method: str, path: str, body: Any = None, *, timeout: float = 90) -> tuple[int, dict]:
    base, key = _endpoint()
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path,
        data=data,
        method=method,
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            status, payload = resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        status = e.code
        try:
            payload = json.loads(e.read() or b"{}")
        except ValueError:
            payload = {
                "error": f"{base} answered HTTP {e.code} without a Sift error (is SIFT_URL right?)"
            }
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise ClientError(f"cannot reach {base}: {reason}") from None
    except ValueError:
        raise ClientError(f"{base} answered something that is not JSON") from None
    if not isinstance(payload, dict):
        raise ClientError(f"{base} answered something that is not a JSON object")
    return status, payload


def _fail(status: int, body: dict) -> None:
    msg = body.get("error") or f"HTTP {status}"
    hint = body.get("hint")
    raise ClientError(f"{msg} (HTTP {status}{', hint: ' + hint if hint else ''})")


def _print_json(body: dict) -> None:
    sys.stdout.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")


def fetch(args: argparse.Namespace) -> int:
    target: dict[str, Any] = {"url": args.url}
    for name in (
        "mode",
        "question",
        "pages",
        "grep",
        "jq",
        "context",
        "recover",
        "links",
        "images",
    ):
        value = getattr(args, name)
        if value is not None:
            target[name] = value
    status, body = request("POST", "/v1/fetch", target)
    if status != 200 or not body.get("success"):
        _fail(status, body)
    if args.json:
        _print_json(body)
    else:
        sys.stdout.write(body.get("content", "") + "\n")
        if body.get("truncated"):
            print(
                "sift: content truncated; narrow with --grep, --question or --pages",
                file=sys.stderr,
            )
    return 0


def parse_targets(text: str) -> list[Any]:
    """A JSON list, `{"targets": …}`, or one URL per line (blank lines and # comments skipped)."""
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            data = json.loads(stripped)
        except ValueError as e:
            raise ClientError(f"targets file is not valid JSON: {e}") from None
        if isinstance(data, dict):
            data = data.get("targets")
        if not isinstance(data, list):
            raise ClientError('expected a JSON list of targets or {"targets": [...]}')
        return [{"url": t} if isinstance(t, str) else t for t in data]
    urls = [ln.strip() for ln in text.splitlines()]
    return [{"url": u} for u in urls if u and not u.startswith("#")]


def batch_submit(args: argparse.Namespace) -> int:
    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ClientError(f"cannot read {args.file}: {e.strerror}") from None
    targets = parse_targets(text)
    if not targets:
        raise ClientError("no targets to submit")
    status, body = request("POST", "/v1/batch", {"targets": targets})
    if status != 202:
        _fail(status, body)
    _print_json(
        {
            "job_id": body["job_id"],
            "reused": body["reused"],
            "status": body.get("status"),
            "targets": body.get("targets"),
        }
    )
    return 0


def batch_status(args: argparse.Namespace) -> int:
    path = _job_path(args.job_id)
    results = "&results=false" if args.no_results else ""
    if args.wait:
        progress = sys.stderr.isatty()
        while True:
            status, body = request("GET", f"{path}?wait=30&results=false")
            if status != 200:
                _fail(status, body)
            if progress:
                print(
                    f"\r{body['status']}: {body['targets_done']}/{body['targets_total']}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
            if body["status"] in TERMINAL:
                break
        if progress:
            print(file=sys.stderr)
    status, body = request("GET", f"{path}?wait=0{results}")
    if status != 200:
        _fail(status, body)
    _print_json(body)
    return 0


def batch_cancel(args: argparse.Namespace) -> int:
    status, body = request("DELETE", _job_path(args.job_id))
    if status != 200:
        _fail(status, body)
    _print_json(body)
    return 0
