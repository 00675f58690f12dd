"""Structured logs: JSON lines (or key=value on a terminal), with redaction in one place.

Two rules live here rather than at every call site:
* a restricted caller's log line carries no host, URL, reason or error detail (`fetch_event`);
* a batch log line carries job ids, counts and statuses only, for every caller (`batch_event`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import orjson

REDACTED_FOR_RESTRICTED = frozenset(
    {"url", "host", "final_url", "reason", "error", "detail", "hint", "upstream_status"}
    | {"title", "metadata", "author", "description", "site_name", "canonical_url", "published"}
)
BATCH_ALLOWED = frozenset(
    {
        "job",
        "job_id",
        "idx",
        "status",
        "outcome",
        "targets",
        "count",
        "done",
        "total",
        "pid",
        "drain_tasks",
        "seconds",
        "nbytes",
        "reused",
        "caller_class",
        "signal",
        "error_type",
    }
)


# Characters that could forge or disguise a log line on a terminal or in a viewer: C0 controls
# (newline, ESC), DEL, C1 controls and the bidirectional overrides. Every format escapes them.
_UNSAFE = [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F]
_UNSAFE += [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in _UNSAFE if c >= 0x7F}
_KV_ESCAPES = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _UNSAFE}
_KV_ESCAPES |= {ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}


def _valid(value: str) -> str:
    """Lone surrogates (undecodable bytes kept by surrogateescape) as U+FFFD."""
    return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def escape_kv(value: str) -> str:
    return _valid(value).translate(_KV_ESCAPES)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(getattr(record, "fields", {}))
        if record.exc_info and record.exc_info[0] is not None:
            out["exc_type"] = record.exc_info[0].__name__
        try:
            line = orjson.dumps(out, default=str).decode()
        except TypeError:  # a string with lone surrogates
            line = orjson.dumps(
                {k: _valid(v) if isinstance(v, str) else v for k, v in out.items()}, default=str
            ).decode()
        # orjson escapes C0 controls itself; the rest become \u escapes inside the strings.
        return line.translate(_JSON_ESCAPES)


class KvFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        parts = [
            time.strftime("%H:%M:%S", time.localtime(record.created)),
            record.levelname.lower(),
            record.name,
            record.getMessage(),
        ]
        for k, v in getattr(record, "fields", {}).items():
            parts.append(f"{k}={v}")
        return " ".join(escape_kv(str(p)) for p in parts)


def setup(level: str = "info", fmt: str = "auto", stream=None) -> None:
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "kv" if stream.isatty() else "json"
    handler = logging.StreamHandler(stream)
    handler.setFormatter(KvFormatter() if fmt == "kv" else JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("trafilatura", "htmldate", "courlan", "charset_normalizer", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def redact(fields: dict[str, Any], *, restricted: bool) -> dict[str, Any]:
    """Drop the fields a restricted caller's log line must not carry."""
    if not restricted:
        return fields
    return {k: v for k, v in fields.items() if k not in REDACTED_FOR_RESTRICTED}


_IN_BATCH: ContextVar[bool] = ContextVar("sift_in_batch", default=False)


@contextlib.contextmanager
def batch_scope() -> Iterator[None]:
    """Code run inside is batch work: its fetch lines are redacted like a restricted caller's.

    The worker's fetches go through the same pipeline as /v1/fetch, whose lines name the URL;
    a batch log line must not, for any caller (docs/SECURITY.md §What is logged).
    """
    token = _IN_BATCH.set(True)
    try:
        yield
    finally:
        _IN_BATCH.reset(token)


def fetch_event(
    logger: logging.Logger, msg: str, *, restricted: bool, level: int = logging.INFO, **fields: Any
) -> None:
    """A per-fetch log line; host, URL, reason and error vanish for restricted callers and
    for batch work."""
    if not logger.isEnabledFor(level):
        return
    redacted = redact(fields, restricted=restricted or _IN_BATCH.get())
    logger.log(level, msg, extra={"fields": redacted})


def batch_event(
    logger: logging.Logger, msg: str, *, level: int = logging.INFO, **fields: Any
) -> None:
    """A batch log line: job ids, counts and statuses only, never a URL or host."""
    bad = set(fields) - BATCH_ALLOWED
    if bad:
        raise ValueError(f"batch log lines may not carry {sorted(bad)}")
    logger.log(level, msg, extra={"fields": fields})
