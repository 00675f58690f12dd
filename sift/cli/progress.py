"""What `sift batch status --wait` shows while it follows a job (docs/BATCH.md §Progress).

Four forms, all on stderr so stdout keeps only the result: `line` redraws one live line on a
terminal; `plain` writes a line whenever the counts change (a log or an agent's captured
stderr); `json` writes one NDJSON event per finished target, per warning, and one at the end;
`none` writes nothing. `auto` is `line` on a terminal and `plain` otherwise.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
from collections.abc import Callable
from typing import TextIO

from sift.cli.stdout import for_stream

MODES = ("auto", "line", "plain", "json", "none")
SHORT_URL = 48  # characters of a target's URL in the progress line
FINISHED = ("done", "failed")


def counts(body: dict) -> tuple[int, int, int]:
    """(ok, failed, total) of a status body: `ok` targets were fetched (status `done`), `failed`
    ones were not; together they are the finished ones, which the API calls `targets_done`
    (docs/BATCH.md §Words for counts)."""
    statuses = [t.get("status") for t in body.get("targets", [])]
    return statuses.count("done"), statuses.count("failed"), body.get("targets_total", 0)


def wire_counts(body: dict) -> dict:
    """`targets_total`, `targets_done` (finished) and `targets_failed`, as the API counts."""
    ok, failed, total = counts(body)
    return {"targets_total": total, "targets_done": ok + failed, "targets_failed": failed}


def tally(ok: int, failed: int, total: int) -> str:
    """The one phrase every CLI view uses for a job's counts: `3 of 12 finished (2 ok, 1
    failed)`."""
    return f"{ok + failed} of {total} finished ({ok} ok, {failed} failed)"


def short_url(url: str, width: int = SHORT_URL) -> str:
    """Host, port and path, without scheme or query, clipped to `width` characters."""
    try:
        parts = urllib.parse.urlsplit(url)
        text = (parts.netloc.rsplit("@", 1)[-1] + parts.path).rstrip("/") or url
    except ValueError:
        text = url
    return text if len(text) <= width else text[: width - 1] + "…"


def slow_target(body: dict) -> str:
    """What the job waits on now: the target being fetched (`fetching #2 host/path`), else the
    next pending target that says why it waits (`#3 host/path waits: crawl_delay until
    12:00:05`), else ''."""
    targets = body.get("targets", [])
    for t in targets:
        if t.get("status") == "running":
            return f"fetching #{t.get('idx')} {short_url(str(t.get('url', '')))}"
    for t in targets:
        waiting = t.get("waiting")
        if t.get("status") == "pending" and isinstance(waiting, dict):
            until = str(waiting.get("not_before") or "")
            until = f" until {until[11:19]}" if len(until) >= 19 else ""
            reason = waiting.get("reason", "?")
            return f"#{t.get('idx')} {short_url(str(t.get('url', '')))} waits: {reason}{until}"
    return ""


def describe(body: dict, elapsed: float) -> str:
    text = f"{body.get('status')}: {tally(*counts(body))}, {elapsed:.0f}s"
    eta = body.get("eta")
    if isinstance(eta, dict) and eta.get("max") is not None:
        text += f", about {_span(eta.get('min'))}–{_span(eta.get('max'))} left"
    slow = slow_target(body)
    return f"{text}, {slow}" if slow else text


def _span(seconds: object) -> str:
    s = max(0, round(float(seconds or 0)))
    return f"{s}s" if s < 120 else f"{round(s / 60)}m"


class Progress:
    def __init__(self, mode: str, stream: TextIO, *, clock: Callable[[], float] = time.monotonic):
        if mode == "auto":
            mode = "line" if stream.isatty() else "plain"
        self.mode, self.stream, self.clock = mode, stream, clock
        self.start = clock()
        self._reported: set[int] = set()
        self._warnings: set[str] = set()
        self._last_plain: tuple = ()
        self._drawn = False

    def update(self, body: dict) -> None:
        """A fresh status body (with or without results) of the job being followed."""
        warning = body.get("warning")
        if warning and warning not in self._warnings:
            self._warnings.add(warning)
            self._warn(body, warning)
        if self.mode == "json":
            for t in body.get("targets", []):
                if t.get("status") in FINISHED and t.get("idx") not in self._reported:
                    self._reported.add(t["idx"])
                    self._event("target", body, **_target_fields(t))
        elif self.mode == "plain":
            key = (body.get("status"), *counts(body), slow_target(body))
            if key != self._last_plain:
                self._last_plain = key
                self._write(f"sift: {describe(body, self.elapsed())}\n")
        elif self.mode == "line":
            width = max(20, shutil.get_terminal_size((80, 24)).columns - 1)
            self._write(describe(body, self.elapsed())[:width], lead="\r\x1b[K")
            self._drawn = True

    def finish(self, body: dict) -> None:
        """The job ended (or the wait stopped): close the line, or write the end event."""
        self.update(body)
        if self.mode == "json":
            self._event("end", body, status=body.get("status"), **wire_counts(body))
        elif self.mode == "line" and self._drawn:
            self._write("\n")

    def elapsed(self) -> float:
        return self.clock() - self.start

    def _warn(self, body: dict, warning: str) -> None:
        if self.mode == "json":
            self._event("warning", body, warning=warning)
        elif self.mode != "none":
            self._write(f"sift: {warning}\n", lead="\r\x1b[K" if self._drawn else "")

    def _event(self, name: str, body: dict, **fields) -> None:
        event = {"event": name, "job_id": body.get("job_id"), **fields}
        event["elapsed"] = round(self.elapsed(), 3)
        self._write(json.dumps(event, ensure_ascii=False) + "\n")

    def _write(self, text: str, *, lead: str = "") -> None:
        """`lead` is this line's own terminal control; the rest can quote a server's words."""
        self.stream.write(lead + for_stream(text, self.stream))
        self.stream.flush()


def _target_fields(t: dict) -> dict:
    fields = {"idx": t.get("idx"), "url": t.get("url"), "status": t.get("status")}
    if t.get("status") == "failed":
        fields.update(error=t.get("error"), hint=t.get("hint"))
        for extra in ("retryable", "retry_after"):
            if extra in t:
                fields[extra] = t[extra]
    return fields
