"""One target: the `/v1/fetch` field set, validated once, for both the API and the worker."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import orjson

from sift.constants import MAX_AGE_MAX
from sift.errors import InvalidTarget
from sift.fetch.grep import compile_pattern

MODES = ("clean", "markdown", "text", "raw", "links")
MAX_URL = 8192
MAX_TEXT_FIELD = 4096  # question, grep, jq, pages

_STR_FIELDS = ("question", "pages", "grep", "jq")
_BOOL_FIELDS = ("context", "recover", "links", "images")
_FIELDS = ("url", "mode", *_STR_FIELDS, *_BOOL_FIELDS, "max_age", "accept_verdicts")
# Verdicts a target may accept (docs/API.md §POST /v1/fetch); the rest never fail a target.
ACCEPTABLE_VERDICTS = ("empty", "soft_404", "bot_wall", "login_wall")


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    mode: str = "clean"
    question: str | None = None
    pages: str | None = None
    grep: str | None = None
    jq: str | None = None
    context: bool | None = None  # None: on when there is a question
    recover: bool = False
    links: bool = True  # link targets in clean/markdown (docs/API.md §POST /v1/fetch)
    images: bool = True
    max_age: int | None = None  # seconds a cached copy may be old; 0: never from the cache
    accept_verdicts: tuple[str, ...] = ()  # verdicts that return the page instead of failing

    @property
    def wants_context(self) -> bool:
        return bool(self.question) if self.context is None else self.context

    def options(self) -> dict[str, Any]:
        """The target's options (everything but the URL), defaults left out."""
        d = asdict(self)
        d.pop("url")
        default = Target(url="")
        return {k: v for k, v in d.items() if v != getattr(default, k)}

    def options_json(self) -> str:
        return orjson.dumps(self.options(), option=orjson.OPT_SORT_KEYS).decode()

    def canonical(self) -> dict[str, Any]:
        return {"url": self.url, **self.options()}

    @classmethod
    def from_stored(cls, url: str, options_json: str) -> Target:
        options = orjson.loads(options_json)
        if "accept_verdicts" in options:
            options["accept_verdicts"] = tuple(options["accept_verdicts"])
        return cls(url=url, **options)


def parse_target(obj: Any) -> Target:
    """Validate a request's target object; every problem is a 400 with a clear message."""
    if not isinstance(obj, dict):
        raise InvalidTarget('a target must be a JSON object with a "url"')
    unknown = sorted(set(obj) - set(_FIELDS))
    if unknown:
        raise InvalidTarget(f"unknown field {unknown[0]!r} (known: {', '.join(_FIELDS)})")
    url = obj.get("url")
    if not isinstance(url, str) or not url.strip():
        raise InvalidTarget('"url" is required and must be a string')
    if len(url) > MAX_URL:
        raise InvalidTarget(f'"url" is longer than {MAX_URL} characters')
    mode = obj.get("mode", "clean")
    if mode is None:
        mode = "clean"
    if mode not in MODES:
        raise InvalidTarget(f"unknown mode {mode!r} (one of: {', '.join(MODES)})")
    values: dict[str, Any] = {"url": url.strip(), "mode": mode}
    for name in _STR_FIELDS:
        v = obj.get(name)
        if v is None:
            continue
        if not isinstance(v, str):
            raise InvalidTarget(f'"{name}" must be a string')
        if len(v) > MAX_TEXT_FIELD:
            raise InvalidTarget(f'"{name}" is longer than {MAX_TEXT_FIELD} characters')
        if v.strip():
            values[name] = v
    for name in _BOOL_FIELDS:
        v = obj.get(name)
        if v is None:
            continue
        if not isinstance(v, bool):
            raise InvalidTarget(f'"{name}" must be true or false')
        values[name] = v
    max_age = obj.get("max_age")
    if max_age is not None:
        if not isinstance(max_age, int) or isinstance(max_age, bool):
            raise InvalidTarget('"max_age" must be a whole number of seconds')
        if not 0 <= max_age <= MAX_AGE_MAX:
            raise InvalidTarget(f'"max_age" must be 0 to {MAX_AGE_MAX} seconds')
        values["max_age"] = max_age
    accept = obj.get("accept_verdicts")
    if accept is not None:
        if not isinstance(accept, list) or not all(isinstance(v, str) for v in accept):
            raise InvalidTarget('"accept_verdicts" must be a list of verdict names')
        wrong = [v for v in accept if v not in ACCEPTABLE_VERDICTS]
        if wrong:
            raise InvalidTarget(
                f"unknown verdict {wrong[0]!r} in accept_verdicts "
                f"(one of: {', '.join(ACCEPTABLE_VERDICTS)})"
            )
        if accept:
            values["accept_verdicts"] = tuple(sorted(set(accept)))
    if values.get("grep") and values.get("jq"):
        raise InvalidTarget('use either "grep" or "jq", not both')
    if values.get("grep"):
        compile_pattern(values["grep"])  # a bad pattern is a 400 before anything is fetched
    return Target(**values)
