"""The client's exceptions: one root, and one class per kind of failure a caller handles.

An `APIError` is Sift's own failure envelope (docs/API.md §Failure envelope) raised as an
exception: it carries the HTTP status, the one-line `error`, the `hint` naming the next step, and
the whole envelope (`upstream_status`, `idx`, a 409's job `status`…). The classes by status exist
so callers can catch the cases they act on (`NotFound`, `Busy`) without comparing numbers.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ClientError(Exception):
    """A request to Sift did not produce an answer."""


class ConfigError(ClientError):
    """SIFT_URL or SIFT_KEY is missing or unusable."""


class ConnectError(ClientError):
    """Sift could not be reached (refused, reset, DNS failure, or timed out)."""


class ProtocolError(ClientError):
    """The server answered something that is not a Sift answer (wrong SIFT_URL?)."""


class APIError(ClientError):
    """Sift answered with its failure envelope."""

    statuses: ClassVar[tuple[int, ...]] = ()

    def __init__(self, status: int, body: dict[str, Any], retry_after: float | None = None):
        self.status = status
        self.error: str = str(body.get("error") or f"HTTP {status}")
        hint = body.get("hint")
        self.hint: str | None = hint if isinstance(hint, str) else None
        self.body = body
        self.retry_after = retry_after
        super().__init__(self.error)

    def __str__(self) -> str:
        hint = f", hint: {self.hint}" if self.hint else ""
        return f"{self.error} (HTTP {self.status}{hint})"


class BadRequest(APIError):
    """The request was malformed (400): fix the arguments."""

    statuses = (400,)


class AuthError(APIError):
    """The key is missing or unknown (401)."""

    statuses = (401,)


class NotFound(APIError):
    """Unknown, expired, or another caller's job (404)."""

    statuses = (404,)


class Conflict(APIError):
    """The job's state forbids the request (409): already finished, or still live."""

    statuses = (409,)


class Busy(APIError):
    """Sift or the caller is at a limit (429) or the database is busy (503): try later."""

    statuses = (429, 503)


_BY_STATUS = {
    s: cls for cls in (BadRequest, AuthError, NotFound, Conflict, Busy) for s in cls.statuses
}


def api_error(status: int, body: dict[str, Any], retry_after: str | None = None) -> APIError:
    """The exception for one failure answer, by status."""
    seconds = None
    if retry_after:
        try:
            seconds = float(retry_after)
        except ValueError:
            seconds = None
    return _BY_STATUS.get(status, APIError)(status, body, seconds)
