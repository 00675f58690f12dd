"""The CLI's exit codes, one table for every verb (docs/BATCH.md §Exit codes)."""

from __future__ import annotations

OK = 0  # the request worked; a job that ended `done` (or is still live)
ERROR = 1  # a request failed: the server's error line is on stderr
USAGE = 2  # a usage or setup problem: bad arguments, no SIFT_KEY, a bad SIFT_URL or config
PARTIAL = 3  # the job ended `partial`: some targets failed
FAILED = 4  # the job ended `failed`: every target failed, or the worker restarted under it
CANCELLED = 5  # the job was cancelled
INTERRUPTED = 130  # Ctrl-C
BROKEN_PIPE = 141  # the reader of stdout went away (`| head`): nothing more is printed

_BY_JOB_STATUS = {"partial": PARTIAL, "failed": FAILED, "cancelled": CANCELLED}


def for_job(status: str) -> int:
    """The exit code that reports a job's status: 0 for `done` or a job still live."""
    return _BY_JOB_STATUS.get(status, OK)
