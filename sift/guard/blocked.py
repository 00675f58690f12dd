"""How a connect-time block surfaces, and how the fetch code recognises it.

The resolver and the socket factory run deep inside aiohttp, which only lets OSError through its
connection machinery, so a block is an OSError subclass. aiohttp then wraps it: a resolver
refusal arrives as `ClientConnectorDNSError` and a socket-factory refusal as
`ClientConnectorError`, both with the block as `.os_error` and `__cause__`. When several
addresses fail at once, aiohappyeyeballs may flatten them into one plain OSError whose message
joins theirs; the marker in the message still identifies the block there.
"""

from __future__ import annotations

import errno
import re

MARKER = "sift guard blocked:"
_IN_MESSAGE = re.compile(re.escape(MARKER) + r" ([^,\]]+)")


class GuardBlocked(OSError):
    """A connection refused by the guard: the destination is not allowed."""

    def __init__(self, reason: str):
        super().__init__(errno.EACCES, f"{MARKER} {reason}")
        self.reason = reason


def _chain(exc: BaseException | None) -> list[BaseException]:
    """`exc` and everything it wraps: aiohttp's `os_error`, causes, contexts, group members."""
    found: list[BaseException] = []
    seen: set[int] = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        found.append(e)
        stack.extend((e.__context__, e.__cause__, getattr(e, "os_error", None)))
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
    return found


def blocked_reason(exc: BaseException | None) -> str | None:
    """The guard's reason if `exc` (or anything it wraps) is a guard block, else None.

    The fetch code maps a non-None answer to `sift.errors.Blocked` (403).
    """
    chain = _chain(exc)
    for e in chain:
        if isinstance(e, GuardBlocked):
            return e.reason
    for e in chain:
        if isinstance(e, OSError):
            m = _IN_MESSAGE.search(str(e))
            if m:
                return m.group(1).strip()
    return None
