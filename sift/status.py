"""Job and target statuses, as stored in the batch tables and shown on the wire."""

from enum import StrEnum


class JobStatus(StrEnum):
    QUEUED = "queued"  # stored, no target taken yet
    RUNNING = "running"  # the worker has taken its first target
    DONE = "done"  # every target done
    PARTIAL = "partial"  # some targets done, some failed
    FAILED = "failed"  # every target failed, or the worker restarted under it
    CANCELLED = "cancelled"  # cancelled by its owner; no further target starts


LIVE = (JobStatus.QUEUED, JobStatus.RUNNING)
TERMINAL = (JobStatus.DONE, JobStatus.PARTIAL, JobStatus.FAILED, JobStatus.CANCELLED)
REUSABLE = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.DONE, JobStatus.PARTIAL)


class TargetStatus(StrEnum):
    PENDING = "pending"  # not fetched yet (or waiting to retry after "busy")
    RUNNING = "running"  # being fetched now
    DONE = "done"  # fetched; result holds the success envelope
    FAILED = "failed"  # error and hint hold the reason


FINISHED = (TargetStatus.DONE, TargetStatus.FAILED)
