"""Times on the wire: RFC 3339 UTC to the second, with a `Z`."""

from datetime import UTC, datetime


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
