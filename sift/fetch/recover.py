"""`recover: true`: the closest archived copy, fetched through the same guard.

Uses the web archive's availability API (`/wayback/available?url=…`) and then the raw snapshot
(`id_` after the timestamp, so the archive returns the page as captured, without its toolbar).
Both requests go through the guarded client, so an archive URL can reach nothing the live fetch
could not.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from yarl import URL

from sift.errors import NoArchivedCopy, TargetError
from sift.fetch.http import HttpClient, Response

_SNAPSHOT = re.compile(r"^(?P<prefix>.*?/web/)(?P<ts>\d{4,14})(?:[a-z]{2}_)?/(?P<orig>.+)$")


@dataclass(frozen=True, slots=True)
class Archived:
    response: Response
    archived_at: str  # RFC 3339 UTC


def raw_snapshot_url(snapshot: str) -> tuple[str, str]:
    """The snapshot's raw-content URL and its 14-digit timestamp."""
    m = _SNAPSHOT.match(snapshot)
    if not m:
        raise NoArchivedCopy("the archive answered with an unrecognised snapshot URL")
    return f"{m['prefix']}{m['ts']}id_/{m['orig']}", m["ts"]


def timestamp_to_rfc3339(ts: str) -> str:
    ts = (ts + "00000000000000")[:14]
    try:
        dt = datetime.strptime(ts, "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        raise NoArchivedCopy("the archive answered with an invalid timestamp") from None
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def closest_snapshot(body: bytes) -> str | None:
    """The closest snapshot's URL in the availability API's answer, None when there is none
    (run in a render child: the answer is upstream bytes, up to `[fetch] max_body`)."""
    try:
        closest = orjson.loads(body)["archived_snapshots"]["closest"]
        available = closest.get("available", True)
        snapshot = closest["url"]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    return snapshot if available and isinstance(snapshot, str) else None


RunCpu = Callable[..., Awaitable[Any]]


async def fetch_archived(http: HttpClient, archive_url: str, url: str, run_cpu: RunCpu) -> Archived:
    """The closest snapshot of `url`, or `NoArchivedCopy`. `run_cpu(fn, *args)` runs the
    reading of the archive's answer (a render child's step in the pipeline)."""
    api = URL(archive_url.rstrip("/") + "/wayback/available").with_query(url=url)
    try:
        answer = await http.get(str(api))
        snapshot = await run_cpu(closest_snapshot, answer.body)
    except TargetError as e:
        raise NoArchivedCopy(f"the archive could not be asked: {e.msg}") from None
    if snapshot is None:
        raise NoArchivedCopy("no archived copy of the page is available")
    raw_url, ts = raw_snapshot_url(snapshot)
    if raw_url.startswith("http://") and archive_url.startswith("https://"):
        raw_url = "https://" + raw_url.removeprefix("http://")
    try:
        response = await http.get(raw_url)
    except TargetError as e:
        raise NoArchivedCopy(f"the archived copy could not be fetched: {e.msg}") from None
    return Archived(response, timestamp_to_rfc3339(ts))
