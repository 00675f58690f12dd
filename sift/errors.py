"""One error hierarchy: each class carries its HTTP status, metrics outcome and hint.

The API renders every `SiftError` through one middleware as the failure envelope; the worker
stores a `TargetError`'s message and hint on the failed target. Nothing else maps errors to
statuses, so the same failure always gets the same status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from sift.timefmt import rfc3339

# Upstream client errors that say "later", not "never" (docs/API.md §Retryable failures).
RETRYABLE_4XX = frozenset({408, 425, 429})
# A message may quote upstream values (a Content-Type header of kilobytes): the failure
# envelope's and a failed target's `error` keep this many characters (docs/SECURITY.md §Values
# taken from pages).
ERROR_MAX = 1000
_SURROGATE = re.compile("[\ud800-\udfff]")

# The failure envelope's own keys (docs/API.md §Errors): no extra field may take one.
ENVELOPE_KEYS = frozenset({"success", "error", "hint", "retryable", "retry_after"})


class _Extra(dict):
    """An error's extra envelope fields: fixed once made, and pickled as a plain dict (a render
    child sends them back to its parent, sift/fetch/render_child.py)."""

    def _fixed(self, *args, **kwargs):
        raise TypeError("an error's extra fields are fixed when it is made")

    __setitem__ = __delitem__ = __ior__ = _fixed
    update = setdefault = pop = popitem = clear = _fixed

    def __reduce__(self):
        return (dict, (dict(self),))


class SiftError(Exception):
    """Sift could not do what was asked.

    `retryable` says whether the same request may succeed later; `retry_after` (epoch seconds
    or None) is the earliest time a retry makes sense, when one is known. `extra` fields join
    the envelope; they are fixed at construction and may not name an envelope key, so no
    error can change what `success`, `error` or `hint` say.
    """

    status: ClassVar[int] = 500
    outcome: ClassVar[str | None] = None
    hint: ClassVar[str | None] = None
    retryable: bool = False

    def __init__(
        self,
        msg: str | None = None,
        *,
        hint: str | None = None,
        retry_after: float | None = None,
        **extra: Any,
    ):
        clash = sorted(ENVELOPE_KEYS & extra.keys())
        if clash:
            raise TypeError(f"{type(self).__name__}: {clash[0]!r} is an envelope key, not extra")
        self.msg = _bounded(msg or (self.__doc__ or "error").strip().splitlines()[0])
        super().__init__(self.msg)
        if hint is not None:
            self.hint = hint
        self.retry_after = retry_after
        self.extra: Mapping[str, Any] = _Extra(extra)

    def envelope(self) -> dict:
        body: dict = {"success": False, "error": self.msg}
        if self.hint:
            body["hint"] = self.hint
        body["retryable"] = self.retryable
        body["retry_after"] = retry_after_field(self.retryable, self.retry_after)
        body.update(self.extra)
        return body


def _bounded(msg: str) -> str:
    if len(msg) > ERROR_MAX:
        msg = msg[: ERROR_MAX - 1] + "…"
    return _SURROGATE.sub("\ufffd", msg)  # a lone surrogate could not be encoded


def retry_after_field(retryable: bool, at: float | None) -> str | None:
    """The wire form of `retry_after`: RFC 3339 UTC, and only on a retryable failure."""
    return rfc3339(at) if retryable and at is not None else None


# Request-level errors (not about a target's fetch).


class BadRequest(SiftError):
    """Malformed request."""

    status = 400


class Unauthorized(SiftError):
    """Missing or unknown API key."""

    status = 401


class NotFound(SiftError):
    """Not found."""

    status = 404


class RequestTimeout(SiftError):
    """The request body did not arrive in time."""

    status = 408


class Conflict(SiftError):
    """The request conflicts with the resource's state."""

    status = 409


class PayloadTooLarge(SiftError):
    """Request body too large."""

    status = 413


class UnsupportedEncoding(SiftError):
    """The request body's Content-Encoding is not one Sift decodes."""

    status = 415


class Unprocessable(SiftError):
    """The request is well-formed but cannot be accepted."""

    status = 422


class TooManyRequests(SiftError):
    """Too busy; try again later."""

    status = 429
    outcome = "busy"
    hint = "retry"
    retryable = True


class RateLimited(TooManyRequests):
    """Too many requests with this API key; slow down (docs/GATES.md §Request rate per key)."""

    outcome = "rate_limited"

    def __init__(self, wait: int, now: float):
        super().__init__(
            f"request rate limit reached for this API key; try again in {wait} s",
            retry_after=now + wait,
        )
        self.wait = wait


class Unavailable(SiftError):
    """The service is temporarily unavailable; try again later."""

    status = 503
    outcome = "busy"
    hint = "retry"
    retryable = True


# Per-target fetch failures (docs/API.md §Failure table). The worker stores these on failed
# targets.


class TargetError(SiftError):
    """The target could not be fetched."""

    status = 502
    outcome = "other"
    # The host that sent an upstream answer (a redirect's last hop): its Retry-After holds
    # that host, not the one asked for (docs/WORKER.md §Spacing and waits). Never in envelopes.
    answered_by: str | None = None


class InvalidTarget(TargetError):
    """Malformed target."""

    status = 400
    outcome = "invalid"


class Refused(TargetError):
    """URL refused by the pre-check."""

    status = 422
    outcome = "blocked"


class RobotsDisallowed(TargetError):
    """The site's robots.txt disallows the path for this agent."""

    status = 403
    outcome = "robots"


class Blocked(TargetError):
    """Blocked at connect: the host resolves to a non-public address."""

    status = 403
    outcome = "blocked"


class Busy(TargetError):
    """Too many fetches in flight; try again later."""

    status = 429
    outcome = "busy"
    hint = "retry"
    retryable = True


class GatesFull(Busy):
    """Too many fetches in flight; try again later.

    Raised by the gates; the drain skips the job until a slot frees rather than for a fixed
    time (docs/WORKER.md §The scheduler).
    """


class GatesUnreachable(GatesFull):
    """The gates' database cannot be reached (engine postgres), so no slot can be taken.

    Not "full": the caller is told the service is unavailable (503), while the drain treats it
    like full gates and looks again when a slot may free.
    """

    status = 503


class RenderBusy(Busy):
    """Every render child of this process stayed busy for the step's whole time; try again
    later (docs/SECURITY.md §The render pool's memory budget)."""


class HostWait(Busy):
    """The site asked for a pause between fetches (Crawl-delay or Retry-After); try again later.

    Batch fetches only; the runner puts the target back until `retry_after` without counting
    it as busy.
    """


class Upstream4xx(TargetError):
    """Upstream answered with a client error."""

    status = 502
    outcome = "upstream_4xx"
    hint = "recover"


class Upstream5xx(TargetError):
    """Upstream answered with a server error."""

    status = 502
    outcome = "upstream_5xx"
    hint = "recover"
    retryable = True


class UpstreamUnreachable(TargetError):
    """Upstream could not be reached (DNS failure, connection refused or reset)."""

    status = 502
    outcome = "upstream_5xx"
    hint = "recover"
    retryable = True


class NoArchivedCopy(UpstreamUnreachable):
    """No archived copy of the page is available."""


class TooManyRedirects(TargetError):
    """Too many redirects."""

    status = 502
    outcome = "upstream_4xx"
    hint = "recover"


class BotWall(TargetError):
    """The page needs a real browser (script-only page or bot wall).

    Retryable: a challenge shown to one request is often not shown to the next."""

    status = 502
    outcome = "upstream_4xx"
    hint = "browser"
    retryable = True


class LoginWall(TargetError):
    """The page asks to log in before it shows its content."""

    status = 502
    outcome = "upstream_4xx"
    hint = "login"


class SoftNotFound(TargetError):
    """The site answered 200 with a page that says the page was not found."""

    status = 502
    outcome = "upstream_4xx"
    hint = "recover"


class EmptyPage(TargetError):
    """The page has no content at all."""

    status = 502
    outcome = "upstream_4xx"
    hint = "browser"


# A page's verdict that fails its target (docs/EXTRACTION.md §Verdicts): the error, and what it
# says after "the page ".
_VERDICT_ERRORS: dict[str, tuple[type[TargetError], str]] = {
    "bot_wall": (BotWall, "is a bot check or challenge, or shows its content only through scripts"),
    "login_wall": (LoginWall, "asks to log in before it shows its content"),
    "soft_404": (SoftNotFound, "says it was not found, though the site answered 200"),
    "empty": (EmptyPage, "has no content"),
}


def verdict_error(verdict: str, upstream_status: int | None = None) -> TargetError:
    """The failure for a page whose `verdict` fails its target; the message names the verdict
    and the target option that returns the page anyway."""
    cls, says = _VERDICT_ERRORS[verdict]
    extra: dict[str, Any] = {"verdict": verdict}
    if upstream_status is not None:
        extra["upstream_status"] = upstream_status
    return cls(
        f'the page {says} (verdict {verdict}); "accept_verdicts": ["{verdict}"] returns it anyway',
        **extra,
    )


class Timeout(TargetError):
    """Upstream timed out."""

    status = 504
    outcome = "timeout"
    hint = "retry"
    retryable = True


class Unsupported(TargetError):
    """Unsupported content type."""

    status = 415
    outcome = "unsupported"


class TooLong(TargetError):
    """Body or PDF over the fetch limits."""

    status = 413
    outcome = "too_long"


class RenderFailed(TargetError):
    """The document could not be rendered: the renderer failed on it."""

    status = 422
    outcome = "unsupported"


class Cancelled(TargetError):
    """Cancelled."""

    status = 503
    outcome = "cancel"
    hint = "retry"
    retryable = True


# Upstream statuses that say "not now" rather than "not here": trying later is the fix, so
# their hint is `retry` (docs/API.md §Hints).
TRANSIENT_STATUSES = frozenset({408, 425, 429, 502, 503, 504})


def upstream_error(
    status: int, msg: str | None = None, *, retry_after: float | None = None
) -> TargetError:
    """The typed error for an upstream HTTP status, carrying `upstream_status`.

    A 5xx, and a 408, 425 or 429, is retryable; `retry_after` is the upstream's own
    Retry-After, when it sent one.
    """
    cls = Upstream5xx if status >= 500 else Upstream4xx
    hint = "retry" if status in TRANSIENT_STATUSES else None
    msg = msg or f"upstream answered HTTP {status}"
    err = cls(msg, hint=hint, retry_after=retry_after, upstream_status=status)
    if status in RETRYABLE_4XX:
        err.retryable = True
    return err


def without_hint(err: SiftError, hint: str) -> SiftError:
    """`err` with `hint` dropped, so a hint never sends a caller back to what just failed."""
    if err.hint == hint:
        err.hint = None
    return err
