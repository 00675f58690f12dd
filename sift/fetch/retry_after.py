"""The upstream's `Retry-After` header (RFC 9110 §10.2.3) as an absolute, capped time.

Both forms are accepted: delay-seconds (`120`) and an HTTP date in any of its three formats
(`Fri, 31 Dec 1999 23:59:59 GMT`, RFC 850, asctime), read by the standard library's date
parser. A value Sift cannot read is ignored rather than guessed at; a past date means "now".
The cap bounds how long one answer can hold back a host's batch work (docs/OPERATIONS.md §[fetch]).
"""

from __future__ import annotations

from datetime import UTC
from email.utils import parsedate_to_datetime

MAX_HEADER = 64  # characters; a longer value is not a valid Retry-After


def parse_retry_after(value: str | None, *, now: float, cap: float) -> float | None:
    """Epoch seconds at which a retry makes sense, in [now, now + cap]; None when unreadable."""
    if not value or len(value) > MAX_HEADER:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        delay = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # the asctime form names no zone; HTTP dates are GMT
            when = when.replace(tzinfo=UTC)
        delay = when.timestamp() - now
    return now + min(max(delay, 0.0), cap)
