"""`sift.client`: a typed Python client for every Sift route (docs/CLIENT.md).

    from sift.client import Client
    with Client() as sift:                      # SIFT_URL, SIFT_KEY
        page = sift.fetch("https://example.org/", question="Who runs it?")

`AsyncClient` has the same methods as coroutines. Failures raise `APIError` subclasses carrying
the HTTP `status`, the envelope's `error` and `hint`.
"""

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
    FetchResult,
    JobList,
    JobStatus,
    JobSummary,
    Submitted,
    Target,
    TargetState,
)

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
