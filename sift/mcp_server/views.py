"""What the MCP tools show of Sift's answers: a fetch envelope as a readable document, a job's
status as short per-target summaries.

A model reads these, so they say what the next step is (which call continues, which hint
applies) instead of leaving it to guess; nothing here grows with the content (titles and URLs
are clipped), so a summary of the largest job stays small.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict  # nested ones become output schemas on 3.11 too

from sift.client import TERMINAL, FetchResult, JobStatus, TargetState
from sift.mcp_server.paging import clip

# What each hint asks the agent to do (docs/API.md §Failure envelope).
HINTS = {
    "browser": "the page needs a real browser (bot wall or script-only page); use a browser "
    "tool if you have one, or recover=true for an archived copy",
    "login": "the page asks to log in first, and Sift does not log in; use a tool that holds "
    "the user's session, or accept_verdicts=['login_wall'] to read the login page itself",
    "recover": "try again with recover=true to read the closest archived copy",
    "retry": "busy or timed out; wait a few seconds and try again",
    "pages": "ask for fewer PDF pages with pages, e.g. pages='1-5'",
    "grep": "narrow the content with grep (a regular expression) or fix the pattern",
    "question": "ask a question instead of reading the whole page",
}


# What a verdict other than ok means for the content that follows (docs/API.md §POST /v1/fetch).
VERDICT_NOTES = {
    "thin": " (little main content)",
    "empty": " (the page has no content)",
    "soft_404": " (the page says it was not found)",
    "bot_wall": " (a bot check or script-only page, not the content)",
    "login_wall": " (a login form, not the content)",
}


def hint_advice(hint: str | None) -> str:
    if not hint:
        return ""
    return f" (hint: {hint}: {HINTS.get(hint, 'see the error')})"


FACT = 80  # characters of one fact of a heading (a content type, a mode, a model's name)


def fact(value: Any) -> str:
    return clip(str(value), FACT)


def heading(env: FetchResult) -> str:
    """The lines before the content: what was fetched and how to read the rest of it. Every
    field is clipped (an upstream header may be kilobytes); `paging.page` still cuts a heading
    past half of `max_length`, so the smallest `max_length` leaves room for content."""
    url = env.get("final_url") or env.get("url") or ""
    lines = [f"Title: {clip(env.get('title') or '(none)')}", f"URL: {clip(url)}"]
    facts = [fact(env.get("content_type", "?")), f"mode {fact(env.get('mode', '?'))}"]
    if env.get("verdict"):
        facts.append(f"verdict {fact(env['verdict'])}{VERDICT_NOTES.get(env['verdict'], '')}")
    if env.get("source") == "archive":
        facts.append(f"archived copy of {fact(env.get('archived_at', '?'))}")
    if env.get("cached"):
        facts.append("from cache")
    pages = env.get("pages")
    if pages:
        facts.append(f"PDF pages {fact(pages.get('returned'))} of {fact(pages.get('total'))}")
    if "matches" in env:
        facts.append(f"{fact(env['matches'])} matching lines")
    if env.get("answer_by"):
        facts.append(f"answer by {fact(env['answer_by'])}")
    lines.append(" · ".join(facts))
    meta = env.get("metadata") or {}
    about = [
        f"{label}{clip(str(meta[key]), 100)}"
        for key, label in (("author", "by "), ("published", "published "), ("site_name", ""))
        if meta.get(key)
    ]
    if about:
        lines.append(" · ".join(about))
    if env.get("truncated"):
        lines.append("Sift cut this content at its output cap" + hint_advice(env.get("hint")))
    return "\n".join(lines)


def document(env: FetchResult) -> str:
    """The text that is paged: the content, then the supporting passages of a question that the
    content does not already hold. Without a model the content *is* the best passages, so
    listing them again would make the agent pay twice for the same tokens (docs/MCP.md §Tools)."""
    text = env.get("content") or ""
    passages = [p for p in env.get("context") or [] if p.strip() and p.strip() not in text]
    if passages:
        text += "\n\nSupporting passages:\n" + "\n".join(f"- {p}" for p in passages)
    return text


def progress_message(st: JobStatus) -> str:
    """`running: 7 of 32 finished (6 ok, 1 failed)`: the CLI's words for counts
    (docs/BATCH.md §Words for counts), and what the job waits on when it says."""
    finished, failed = st.get("targets_done", 0), st.get("targets_failed", 0)
    total = st.get("targets_total", 0)
    text = (
        f"{st['status']}: {finished} of {total} finished ({finished - failed} ok, {failed} failed)"
    )
    slow = slow_target(st)
    return f"{text}; {slow}" if slow else text


def slow_target(st: JobStatus) -> str:
    """What the job waits on now: `fetching #2 http://…`, or `#3 http://… waits: crawl_delay
    until …` (docs/API.md §Waiting targets), else ''."""
    targets = st.get("targets", [])
    for t in targets:
        if t["status"] == "running":
            return f"fetching #{t['idx']} {clip(t.get('url', ''), 100)}"
    for t in targets:
        w = t.get("waiting")
        if t["status"] == "pending" and w:
            until = f" until {w['not_before']}" if w.get("not_before") else ""
            return f"#{t['idx']} {clip(t.get('url', ''), 100)} waits: {w['reason']}{until}"
    return ""


class TargetSummary(TypedDict, total=False):
    idx: int
    url: str
    status: str
    title: str
    chars: int
    truncated: bool
    error: str
    hint: str | None
    retryable: bool
    waiting: dict[str, Any]


class JobListView(TypedDict):
    jobs: list[dict[str, Any]]
    next_cursor: str | None


class JobSummaryView(TypedDict, total=False):
    job_id: str
    status: str
    ended: bool
    targets_total: int
    targets_done: int
    targets_failed: int
    error: str
    warning: str
    retry_of: str | None
    retries: list[str]
    eta: dict[str, Any] | None
    waiting_on: str
    targets: list[TargetSummary]
    next: str


def target_summary(t: TargetState) -> TargetSummary:
    out: TargetSummary = {"idx": t["idx"], "url": clip(t.get("url", "")), "status": t["status"]}
    result = t.get("result")
    if result:
        out["title"] = clip(result.get("title") or "")
        out["chars"] = result.get("chars", len(result.get("content") or ""))
        out["truncated"] = bool(result.get("truncated"))
    if t.get("waiting"):
        out["waiting"] = dict(t["waiting"])
    if t["status"] == "failed":
        out["error"] = clip(t.get("error") or "", 1000)
        out["hint"] = t.get("hint")
        if "retryable" in t:
            out["retryable"] = bool(t["retryable"])
    return out


def job_summary(st: JobStatus) -> JobSummaryView:
    """The job with one short line of facts per target, and what to call next."""
    ended = st.get("status") in TERMINAL
    targets = st.get("targets", [])
    failed = st.get("targets_failed", sum(t["status"] == "failed" for t in targets))
    out: JobSummaryView = {
        "job_id": st["job_id"],
        "status": st["status"],
        "ended": ended,
        "targets_total": st.get("targets_total", len(targets)),
        "targets_done": st.get("targets_done", 0),
        "targets_failed": failed,
    }
    for key in ("error", "warning", "retry_of", "retries"):
        if st.get(key):
            out[key] = st[key]  # type: ignore[literal-required]
    if not ended:
        out["eta"] = st.get("eta")
        slow = slow_target(st)
        if slow:
            out["waiting_on"] = slow
    out["targets"] = [target_summary(t) for t in targets]
    if not ended:
        out["next"] = "the job is still running: call batch_wait again to keep waiting"
    elif failed and st["status"] != "cancelled":
        out["next"] = (
            "read a done target with batch_result(job_id, idx); act on each failed target's "
            "hint, or call batch_retry(job_id) to run the failed targets again"
        )
    else:
        out["next"] = "read a target's content with batch_result(job_id, idx)"
    return out
