"""`GET /v1/batch`: the caller's own jobs, live first, then the most recent (docs/API.md
§GET /v1/batch).

"Own" is the whole identity: the stored owner (`workspace/name`) and class, never the bare
name, so a name re-created in another workspace lists none of the earlier identity's jobs.

Pages are keyset cursors: the position of the last entry, as opaque base64url JSON. A cursor
carries no caller: the list is always filtered by the caller who asks, so a cursor passed
between callers shows nothing that is not theirs.
"""

from __future__ import annotations

import base64
import binascii

import orjson

from sift.auth import Caller
from sift.batch.jobs import JOB_ID
from sift.errors import BadRequest
from sift.store import JobSummary, ListPosition, Store
from sift.store.rules import expires_at
from sift.timefmt import rfc3339

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
CURSOR_MAX = 256  # characters
BAD_CURSOR = "cursor is not one this list gave out; start again without it"


def parse_limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return limit


def encode_cursor(row: JobSummary) -> str:
    raw = orjson.dumps([row.ended, row.created_at, row.id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(raw: str) -> ListPosition:
    if not raw or len(raw) > CURSOR_MAX:
        raise BadRequest(BAD_CURSOR)
    try:
        ended, created_at, job_id = orjson.loads(
            base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        )
    except (binascii.Error, ValueError, TypeError):
        raise BadRequest(BAD_CURSOR) from None
    if (
        ended not in (0, 1)
        or isinstance(ended, bool)
        or not isinstance(created_at, (int, float))
        or isinstance(created_at, bool)
        or not isinstance(job_id, str)
        or not JOB_ID.fullmatch(job_id)  # a NUL byte would be a 500 on PostgreSQL
    ):
        raise BadRequest(BAD_CURSOR)
    return ListPosition(ended, float(created_at), job_id)


def entry(row: JobSummary, ttl: float) -> dict:
    return {
        "job_id": row.id,
        "status": row.status,
        "targets_total": row.targets_total,
        "targets_done": row.targets_done,
        "targets_failed": row.targets_failed,
        "created_at": rfc3339(row.created_at),
        "expires_at": rfc3339(expires_at(row.lease, ttl)),
        "retry_of": row.retry_of,
    }


async def list_jobs(
    store: Store, caller: Caller, *, now: float, ttl: float, limit: int, cursor: str | None
) -> dict:
    """One page of the caller's unexpired jobs and the cursor of the next (None at the end)."""
    after = decode_cursor(cursor) if cursor is not None else None
    rows = await store.batch.list_jobs(
        caller.owner, caller.cls, now=now, ttl=ttl, limit=limit + 1, after=after
    )
    page = rows[:limit]
    more = len(rows) > limit
    return {
        "success": True,
        "jobs": [entry(r, ttl) for r in page],
        "next_cursor": encode_cursor(page[-1]) if more else None,
    }
