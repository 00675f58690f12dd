"""What the CLI tells people: each hint as the command to run, and the server's few texts that
name HTTP routes rewritten as `sift` commands (docs/BATCH.md §Hints for people).

The API's words stay the API's (an HTTP caller acts on `hint: recover` and on routes); a person
at a terminal gets the flag or verb that does the same, so no CLI line points at a route.
"""

from __future__ import annotations

import re

# hint -> what to do, for `sift fetch` (flags) and for a batch target (its options, a retry)
FOR_FETCH = {
    "recover": "the live page failed: run it again with --recover to read its closest "
    "web-archive copy",
    "retry": "busy or timed out: try again in a few seconds",
    "browser": "the page needs a real browser (a bot wall or a script-only page); --recover "
    "reads an archived copy instead",
    "pages": "ask for fewer PDF pages with --pages, e.g. --pages 1-5",
    "grep": "fix the --grep pattern (RE2 syntax), or narrow the content with it",
    "question": "ask --question instead of reading the whole page",
}
FOR_TARGET = {
    "recover": 'the live page failed: submit the target again with "recover": true to read '
    "its closest web-archive copy (or: sift fetch URL --recover)",
    "retry": "busy or timed out: 'sift batch retry JOB_ID --only-retryable' runs such targets "
    "again",
    "browser": 'the page needs a real browser; "recover": true reads an archived copy instead',
    "pages": 'ask for fewer PDF pages with the target\'s "pages", e.g. "1-5"',
    "grep": 'fix the target\'s "grep" pattern (RE2 syntax)',
    "question": 'give the target a "question" instead of reading the whole page',
}

_STATUS_ROUTE = re.compile(r"\(GET /v1/batch/([0-9a-f]+)\?wait=\d+\) or cancel it")
_RETRY_ROUTE = re.compile(
    r'send "fresh": true \(sift batch submit --fresh\) for a new job, or retry its failed '
    r"targets with POST /v1/batch/(?:\{id\}|[0-9a-f]+)/retry"
)


def hint(name: str | None, *, target: bool = False, job_id: str = "JOB_ID") -> str:
    """`name: what to do`, or '' without a hint."""
    if not name:
        return ""
    advice = (FOR_TARGET if target else FOR_FETCH).get(name, "")
    advice = advice.replace("JOB_ID", job_id)
    return f"{name}: {advice}" if advice else name


def for_people(text: str, *, job_id: str | None = None) -> str:
    """A server text with the routes it names replaced by the `sift` commands that do it."""
    text = _STATUS_ROUTE.sub(
        r"with 'sift batch status \1 --wait' or cancel it with 'sift batch cancel \1'", text
    )
    retry = f"sift batch retry {job_id}" if job_id else "sift batch retry JOB_ID"
    return _RETRY_ROUTE.sub(
        f"run 'sift batch submit --fresh' for a new job, or '{retry}' to run its failed "
        "targets again",
        text,
    )


def error_line(error: str, status: int | None, hint_name: str | None) -> str:
    """A refused request for people: the error, its HTTP status, and what to do."""
    line = for_people(error)
    if status:
        line += f" (HTTP {status})"
    advice = hint(hint_name)
    return f"{line}; hint: {advice}" if advice else line


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 target`, `2 targets`."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
