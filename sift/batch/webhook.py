"""The `webhook` field of a submit (docs/API.md §Webhooks): validated before the database is
touched, its URL pre-checked by the same guard as a target's."""

from __future__ import annotations

from typing import Any

from sift.batch.submit import Precheck
from sift.errors import BadRequest, SiftError
from sift.store.webhook_rules import expand

FIELDS = ("url", "events", "results")


def parse_webhook(raw: Any, precheck: Precheck | None) -> tuple[str, tuple[str, ...], bool] | None:
    """`(url, event types, results)`, or None when the submit has no webhook. A bare string
    is the URL."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"url": raw}
    if not isinstance(raw, dict):
        raise BadRequest('"webhook" must be {"url": ..., "events": [...]} or a URL string')
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise BadRequest(f"webhook: unknown field {unknown[0]!r} (known: url, events, results)")
    url = raw.get("url")
    if not isinstance(url, str) or not url:
        raise BadRequest('webhook: "url" is required, a URL string')
    events = raw.get("events")
    if events is not None and (
        not isinstance(events, list) or not all(isinstance(e, str) for e in events) or not events
    ):
        raise BadRequest('webhook: "events" must be a non-empty list of event types')
    results = raw.get("results", False)
    if not isinstance(results, bool):
        raise BadRequest('webhook: "results" must be true or false')
    try:
        kinds = expand(events)
    except ValueError as e:
        raise BadRequest(f"webhook: {e}") from None
    if precheck is not None:
        try:
            precheck(url)
        except SiftError as e:
            raise type(e)(f"webhook url: {e.msg}", hint=e.hint) from None
    return url, kinds, results
