"""Batch jobs: submit, status, cancel and touch for the API; the drain for the worker.

The API process calls `submit`, `read_status`, `touch` and `cancel`; the worker runs a
`Runner` with an injected fetch function. Only `sift.store` speaks SQL.
"""

from sift.batch.jobs import CancelOutcome, JobStatusView, cancel, owns, read_status, touch
from sift.batch.rotation import Rotation
from sift.batch.runner import FetchFn, Runner
from sift.batch.submit import Precheck, Submitted, idem_key, parse_targets, submit
from sift.batch.wire import rfc3339, status_body, status_json

__all__ = [
    "CancelOutcome",
    "FetchFn",
    "JobStatusView",
    "Precheck",
    "Rotation",
    "Runner",
    "Submitted",
    "cancel",
    "idem_key",
    "owns",
    "parse_targets",
    "read_status",
    "rfc3339",
    "status_body",
    "status_json",
    "submit",
    "touch",
]
