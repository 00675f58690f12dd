"""Every HTTP call the CLI makes, in one place: one function per API route, on `sift.client`.

The CLI has no HTTP code of its own: each function is a call of the synchronous `Client`
(docs/CLIENT.md), and its failures are the client's exceptions, whose text is the server's
error line with its status and hint. The client (and the HTTP library under it) is imported on
the first call, so `sift --help` and the local verbs start without it. One client serves every
call of a command, reusing its connection while `--wait` follows a job; `close()` ends it.
"""

from __future__ import annotations

import atexit
from typing import TYPE_CHECKING, Any

from sift.client.errors import APIError, ClientError
from sift.client.errors import ConfigError as ClientConfigError

if TYPE_CHECKING:
    from sift.client import Client

__all__ = [
    "APIError",
    "ClientConfigError",
    "ClientError",
    "cancel",
    "close",
    "fetch",
    "job",
    "jobs",
    "retry",
    "submit",
]

_open: Client | None = None


def _client() -> Client:
    """The command's client, opened again when SIFT_URL or SIFT_KEY changed since."""
    global _open
    from sift.client import Client
    from sift.client.calls import endpoint

    if _open is not None and _open.endpoint != endpoint():
        close()
    if _open is None:
        _open = Client()
    return _open


def close() -> None:
    global _open
    if _open is not None:
        c, _open = _open, None
        c.close()


atexit.register(close)  # a caller outside `main` (a script, a test) closes at exit too


def _answer(method: str, *args: Any, **kwargs: Any) -> dict:
    """One call of the client; arguments it refuses before sending (a targets file item that is
    neither a URL nor an object, an empty job id) fail like a refused request."""
    try:
        return dict(getattr(_client(), method)(*args, **kwargs))
    except (TypeError, ValueError) as e:
        raise ClientError(str(e)) from None


def fetch(target: dict) -> dict:
    options = {k: v for k, v in target.items() if k != "url"}
    return _answer("fetch", target["url"], **options)


def submit(targets: list, *, fresh: bool = False, webhook: str | None = None) -> dict:
    return _answer("batch_submit", targets, fresh=fresh, webhook=webhook)


def events(job_id: str, *, results: bool = False):
    """The job's events as they come (the client resumes a dropped stream)."""
    try:
        yield from _client().events(job_id, results=results)
    except (TypeError, ValueError) as e:
        raise ClientError(str(e)) from None


def job(job_id: str, *, wait: float = 0, results: bool = True) -> dict:
    return _answer("batch_status", job_id, wait=wait, results=results)


def cancel(job_id: str) -> dict:
    return _answer("batch_cancel", job_id)


def jobs(*, limit: int = 20, cursor: str | None = None) -> dict:
    return _answer("batch_list", limit=limit, cursor=cursor)


def retry(job_id: str, *, only_retryable: bool = False, webhook: str | None = None) -> dict:
    return _answer("batch_retry", job_id, only_retryable=only_retryable, webhook=webhook)
