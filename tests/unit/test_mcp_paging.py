"""MCP answers are pages: never more than max_length characters, heading and note included,
and reading on with the start_index each note names gives the document exactly (docs/MCP.md)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sift.mcp_server import paging, views

NEXT = re.compile(r"start_index=(\d+) to continue\]$")


def read_all(heading: str, doc: str, max_length: int) -> tuple[str, list[str]]:
    start, parts, answers = 0, [], []
    while True:
        answer = paging.page(heading, doc, start, max_length, "fetch with the same arguments")
        answers.append(answer)
        body = answer[len(heading) + 2 :] if heading else answer
        m = NEXT.search(answer)
        if not m:
            parts.append(body)
            return "".join(parts), answers
        nxt = int(m.group(1))
        parts.append(body[: nxt - start])
        start = nxt


@given(
    doc=st.tuples(st.text(max_size=50), st.integers(0, 400)).map(lambda t: t[0] * t[1]),
    heading=st.text(min_size=0, max_size=400).map(lambda h: h.strip("\n")),
    max_length=st.integers(paging.MAX_LENGTH_MIN, 3000),
)
def test_no_answer_exceeds_max_length_and_the_pages_join_to_the_document(doc, heading, max_length):
    joined, answers = read_all(heading, doc, max_length)
    assert joined == doc
    assert all(len(a) <= max_length for a in answers)


def test_the_note_says_how_many_characters_remain_and_where_to_continue():
    answer = paging.page("Title: t", "x" * 5000, 0, 1000, "fetch with the same arguments")
    assert answer.startswith("Title: t\n\nxxx")
    kept = answer.split("\n\n")[1].count("x")
    assert answer.endswith(
        f"[{5000 - kept} more characters of 5000: call fetch with the same arguments and "
        f"start_index={kept} to continue]"
    )


def test_a_start_index_past_the_end_is_an_error_naming_the_length():
    with pytest.raises(paging.PastTheEnd, match="the content has 10 characters"):
        paging.page("", "0123456789", 10, 1000, "fetch")


def test_an_empty_document_is_one_empty_page():
    assert paging.page("Title: t", "", 0, 1000, "fetch") == "Title: t\n\n"


def test_a_heading_clips_long_titles_and_urls_and_says_where_the_content_came_from():
    env = {"title": "T" * 1000, "final_url": "http://a/" + "p" * 9000, "content_type": "text/html"}
    env |= {"mode": "clean", "source": "archive", "archived_at": "2026-01-01T00:00:00Z"}
    text = views.heading(env)
    assert max(len(line) for line in text.splitlines()) <= paging.SHOWN + 10
    assert "archived copy of 2026-01-01T00:00:00Z" in text


def test_a_cut_content_says_how_to_narrow_it():
    env = {"title": "t", "url": "http://a/", "truncated": True, "hint": "pages"}
    assert "output cap (hint: pages: ask for fewer PDF pages" in views.heading(env)


def test_passages_the_content_already_holds_are_not_repeated():
    """docs/MCP.md §Tools: the embedded digest's content is the passages themselves."""
    passages = ["It will cost twelve million.", "Work starts in May."]
    env = {"content": "\n\n".join(passages), "context": passages, "answer_by": "passages"}
    assert views.document(env) == "It will cost twelve million.\n\nWork starts in May."
    env["context"] = [*passages, "Shared by the port."]
    assert views.document(env).endswith("May.\n\nSupporting passages:\n- Shared by the port.")


def test_supporting_passages_follow_the_answer_in_the_document():
    env = {"content": "Twelve million.", "context": ["It will cost twelve million.", "Shared."]}
    assert views.document(env) == (
        "Twelve million.\n\nSupporting passages:\n- It will cost twelve million.\n- Shared."
    )


def test_a_job_summary_says_what_to_call_next():
    st_ = {"job_id": "j", "status": "running", "targets_total": 2, "targets_done": 1}
    st_["targets"] = [
        {"idx": 0, "url": "http://a/", "status": "failed", "error": "e", "hint": "retry"},
        {"idx": 1, "url": "http://b/", "status": "pending"},
    ]
    s = views.job_summary(st_)
    assert s["ended"] is False and "batch_wait again" in s["next"]
    assert s["targets_failed"] == 1 and s["targets"][0]["hint"] == "retry"
    st_["status"] = "partial"
    assert "batch_retry" in views.job_summary(st_)["next"]


def test_a_heading_names_the_author_date_and_site_when_the_page_gives_them():
    env = {"title": "t", "url": "http://a/", "content_type": "text/html", "mode": "clean"}
    env["metadata"] = {"author": "Harbour Desk", "published": "2026-03-02", "site_name": None}
    assert views.heading(env).splitlines()[-1] == "by Harbour Desk · published 2026-03-02"
    env["metadata"] = {"author": None, "published": None}
    assert len(views.heading(env).splitlines()) == 3


def test_a_heading_says_the_pages_verdict_and_what_it_means():
    # docs/MCP.md: a page returned anyway says what it is.
    env = {"title": "t", "url": "http://a/", "content_type": "text/html", "mode": "clean"}
    assert "verdict ok" in views.heading(env | {"verdict": "ok"})
    text = views.heading(env | {"verdict": "soft_404"})
    assert "verdict soft_404 (the page says it was not found)" in text
