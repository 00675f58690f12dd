"""What `sift batch status --wait` shows while it follows a job, and how it shapes results
(docs/BATCH.md §Progress, §Results): pure functions over status bodies."""

from __future__ import annotations

import io
import json

import pytest

from sift.cli import exits, output
from sift.cli.client import ClientConfigError
from sift.cli.progress import Progress, describe
from tests.clock import Clock


class Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def body(status="running", targets=(), warning=None):
    b = {"job_id": "j1", "status": status, "targets_total": len(targets)}
    b["targets"] = [
        {"idx": i, "url": f"http://site{i}.test/p", "status": s} for i, s in enumerate(targets)
    ]
    for t in b["targets"]:
        if t["status"] == "failed":
            t.update(error="upstream answered HTTP 404", hint="recover")
    if warning:
        b["warning"] = warning
    return b


def test_the_live_line_counts_finished_ok_failed_and_names_the_target_being_fetched():
    """docs/BATCH.md §Words for counts, §Progress: the slow target by idx and short URL."""
    b = body(targets=["done", "failed", "running", "pending"])
    assert describe(b, 12.4) == (
        "running: 2 of 4 finished (1 ok, 1 failed), 12s, fetching #2 site2.test/p"
    )


def test_on_a_terminal_each_redraw_erases_the_whole_line_and_the_end_closes_it():
    stream, clock = Stream(tty=True), Clock(100.0)
    p = Progress("auto", stream, clock=clock)
    p.update(body(targets=["running", "pending", "pending", "pending"]))
    clock.now += 3
    p.update(body(targets=["done", "done", "running", "pending"]))
    p.finish(body("done", ["done"] * 4))
    draws = stream.getvalue().split("\r\x1b[K")[1:]
    assert len(draws) == 3 and stream.getvalue().endswith("\n")
    assert draws[1] == "running: 2 of 4 finished (2 ok, 0 failed), 3s, fetching #2 site2.test/p"
    assert draws[2] == "done: 4 of 4 finished (4 ok, 0 failed), 3s\n"


def test_without_a_terminal_a_line_is_written_only_when_something_changed():
    stream = Stream(tty=False)
    p = Progress("auto", stream, clock=Clock(100.0))
    same = body(targets=["running", "pending"])
    p.update(same)
    p.update(same)
    p.finish(body("done", ["done", "done"]))
    lines = stream.getvalue().splitlines()
    assert lines == [
        "sift: running: 0 of 2 finished (0 ok, 0 failed), 0s, fetching #0 site0.test/p",
        "sift: done: 2 of 2 finished (2 ok, 0 failed), 0s",
    ]


def test_json_progress_is_one_event_per_finished_target_then_the_end():
    stream = Stream(tty=True)
    p = Progress("json", stream, clock=Clock(100.0))
    p.update(body(targets=["done", "running", "pending"]))
    p.update(body(targets=["done", "failed", "running"]))
    p.update(body(targets=["done", "failed", "running"]))
    p.finish(body("partial", ["done", "failed", "done"]))
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["event"], e.get("idx")) for e in events] == [
        ("target", 0),
        ("target", 1),
        ("target", 2),
        ("end", None),
    ]
    assert events[1]["error"] == "upstream answered HTTP 404" and events[1]["hint"] == "recover"
    assert events[3] == {
        "event": "end",
        "job_id": "j1",
        "status": "partial",
        "targets_total": 3,
        "targets_done": 3,
        "targets_failed": 1,
        "elapsed": 0.0,
    }


@pytest.mark.parametrize("mode", ["line", "plain", "json"])
def test_a_warning_is_shown_once(mode):
    stream = Stream(tty=False)
    p = Progress(mode, stream, clock=Clock(100.0))
    for _ in range(3):
        p.update(body("queued", ["pending"], warning="no worker is running"))
    assert stream.getvalue().count("no worker is running") == 1


def test_progress_none_writes_nothing():
    stream = Stream(tty=True)
    p = Progress("none", stream, clock=Clock(100.0))
    p.update(body(targets=["done", "running"], warning="w"))
    p.finish(body("done", ["done", "done"]))
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    ("status", "code"),
    [("done", 0), ("queued", 0), ("running", 0), ("partial", 3), ("failed", 4), ("cancelled", 5)],
)
def test_each_job_status_has_its_exit_code(status, code):
    assert exits.for_job(status) == code


# -- result shaping ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "ext"),
    [
        ({"mode": "clean", "content_type": "text/html"}, ".md"),
        ({"mode": "links", "content_type": "text/html"}, ".md"),
        ({"mode": "text", "content_type": "text/html"}, ".txt"),
        ({"mode": "raw", "content_type": "text/html"}, ".html"),
        ({"mode": "raw", "content_type": "text/plain"}, ".txt"),
        ({"mode": "clean", "content_type": "application/json"}, ".json"),
        ({"mode": "clean", "content_type": "application/pdf"}, ".md"),
    ],
)
def test_a_files_extension_follows_its_mode_and_content_type(result, ext):
    assert output.extension(result) == ext


def test_a_file_is_named_by_idx_and_host_with_nothing_unsafe():
    t = {"idx": 3, "url": "http://user@[::1]:8080/../x", "result": {"mode": "text"}}
    assert output.file_name(t) == "03-1_8080.txt"
    t = {"idx": 4, "url": "https://docs.example.org/a", "result": {"mode": "clean"}}
    assert output.file_name(t) == "04-docs.example.org.md"
    assert output.file_name({"idx": 12, "url": "not a url"}) == "12-target.md"


def test_markdown_has_a_heading_per_target_with_its_status_error_and_hint():
    b = body("partial", ["done", "failed"])
    b["targets"][0]["result"] = {"content": "# Page\n\ntext", "note": "grep: no line matches"}
    text = output.as_markdown(b)
    assert text.startswith("# Job j1: partial, 2 of 2 finished (1 ok, 1 failed)\n")
    assert "## 0. http://site0.test/p (done)\n\nnote: grep: no line matches\n\n### Page" in text
    assert "## 1. http://site1.test/p (failed)\n\nerror: upstream answered HTTP 404\n" in text
    assert (
        'hint: recover: the live page failed: submit the target again with "recover": true' in text
    )


def test_one_target_is_picked_by_idx_and_a_missing_one_is_a_usage_error():
    b = body("done", ["done", "done"])
    assert output.select_target(b, 1)["targets"] == [b["targets"][1]]
    with pytest.raises(ClientConfigError, match="the job's targets are 0 to 1"):
        output.select_target(b, 2)


def test_a_pages_headings_sit_below_the_target_heading_in_markdown():
    """docs/BATCH.md §Results: the page's `#` becomes `###` under `## IDX. URL`; code stays."""
    content = "# Title\n\nText.\n\n## Part\n```sh\n# a comment\n```\n##### Deep\n#hashtag"
    b = body("done", ["done"])
    b["targets"][0]["result"] = {"content": content, "mode": "clean"}
    text = output.as_markdown(b)
    assert "\n### Title\n\nText.\n\n#### Part\n```sh\n# a comment\n```\n###### Deep\n#hashtag" in (
        text
    )
    top = [ln for ln in text.splitlines() if ln.startswith("# ")]
    assert top == [text.splitlines()[0], "# a comment"]  # the job's heading, and code
    b["targets"][0]["result"] = {"content": "# not a heading", "mode": "text"}
    assert "\n# not a heading" in output.as_markdown(b)


def test_the_line_names_a_waiting_target_with_its_reason_and_the_jobs_eta():
    """docs/BATCH.md §Progress, docs/API.md §Waiting targets."""
    b = body(targets=["done", "pending", "pending"])
    b["targets"][1]["waiting"] = {
        "reason": "crawl_delay",
        "host": "site1.test",
        "not_before": "2026-03-02T10:15:12Z",
    }
    b["targets"][2]["waiting"] = {"reason": "turn", "host": "site2.test", "not_before": None}
    b["eta"] = {"min": 3, "max": 400}
    assert describe(b, 5) == (
        "running: 1 of 3 finished (1 ok, 0 failed), 5s, about 3s–7m left, "
        "#1 site1.test/p waits: crawl_delay until 10:15:12"
    )
    b["eta"] = None  # no bound (no worker): nothing said
    assert ", about" not in describe(b, 5)


OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"


@pytest.mark.parametrize("mode", ["line", "plain", "json"])
def test_on_a_terminal_progress_escapes_a_servers_controls_but_keeps_its_own(mode):
    """docs/SECURITY.md §Terminal output: a warning or note can quote a page or a header."""
    stream = Stream(tty=True)
    p = Progress(mode, stream, clock=Clock(100.0))
    p.update(body(targets=["running"]))
    p.update(body(targets=["done"], warning=f"slow host{OSC52}"))
    p.finish(body("done", ["done"]))
    written = stream.getvalue()
    assert "\x1b]52" not in written and "\x07" not in written
    assert "\\u001b]52;c;cm0gLXJmIH4=\\u0007" in written
    assert ("\r\x1b[K" in written) == (mode == "line")


def test_a_pipe_gets_progress_as_the_server_sent_it():
    stream = Stream(tty=False)
    p = Progress("plain", stream, clock=Clock(100.0))
    p.update(body(targets=["done"], warning=f"slow host{OSC52}"))
    assert OSC52 in stream.getvalue()


def test_a_note_on_a_terminal_stderr_escapes_controls(monkeypatch):
    from sift.cli import stdout

    err = Stream(tty=True)
    monkeypatch.setattr("sys.stderr", err)
    stdout.note(f"upstream said{OSC52} \x9b2J")
    assert err.getvalue() == "sift: upstream said\\u001b]52;c;cm0gLXJmIH4=\\u0007 \\u009b2J\n"
