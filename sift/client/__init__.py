"""`sift.client`: a typed Python client for every Sift route (docs/CLIENT.md).

    from sift.client import Client
    with Client() as sift:                      # SIFT_URL, SIFT_KEY
        page = sift.fetch("https://example.org/", question="Who runs it?")

`AsyncClient` has the same methods as coroutines. Failures raise `APIError` subclasses carrying
the HTTP `status`, the envelope's `error` and `hint`.

The names load on first use, so code that needs only the errors or the types (the CLI's help,
its local verbs) does not pay for importing the HTTP library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sift.client.aio import AsyncClient
    from sift.client.errors import (
        APIError,
        AuthError,
        BadRequest,
        Busy,
        ClientError,
        ConfigError,
        Conflict,
        ConnectError,
        NotFound,
        ProtocolError,
    )
    from sift.client.sync import Client
    from sift.client.types import (
        TERMINAL,
        CancelReply,
        Event,
        FetchResult,
        JobList,
        JobStatus,
        JobSummary,
        Submitted,
        Target,
        TargetState,
    )

_WHERE = {
    "AsyncClient": "aio",
    "Client": "sync",
    **dict.fromkeys(
        (
            "APIError",
            "AuthError",
            "BadRequest",
            "Busy",
            "ClientError",
            "ConfigError",
            "Conflict",
            "ConnectError",
            "NotFound",
            "ProtocolError",
        ),
        "errors",
    ),
    **dict.fromkeys(
        (
            "TERMINAL",
            "CancelReply",
            "Event",
            "FetchResult",
            "JobList",
            "JobStatus",
            "JobSummary",
            "Submitted",
            "Target",
            "TargetState",
        ),
        "types",
    ),
}

__all__ = [
    "TERMINAL",
    "APIError",
    "AsyncClient",
    "AuthError",
    "BadRequest",
    "Busy",
    "CancelReply",
    "Client",
    "ClientError",
    "ConfigError",
    "Conflict",
    "ConnectError",
    "Event",
    "FetchResult",
    "JobList",
    "JobStatus",
    "JobSummary",
    "NotFound",
    "ProtocolError",
    "Submitted",
    "Target",
    "TargetState",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sift.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sift.client.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*globals(), *__all__]
