"""Batch jobs on the API side: submit, status, cancel and touch.

The API process calls `submit`, `read_status`, `touch` and `cancel`; the drain is the worker
process's own code (`worker.drain`). Only `sift.store` speaks SQL.
"""

from sift.batch.jobs import CancelOutcome, JobStatusView, cancel, owns, read_status, touch
from sift.batch.submit import Precheck, Submitted, idem_key, parse_targets, submit
from sift.batch.wire import rfc3339, status_body, status_json

__all__ = [
    "CancelOutcome",
    "JobStatusView",
    "Precheck",
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
