"""Private internals of pinned libraries (and of the standard library's multiprocessing) that
Sift reads (pyproject.toml pins the versions they were written for): each must still be there,
or this fails loudly instead of the code quietly taking its fallback (docs/EXTRACTION.md
§Libraries, docs/WORKER.md §robots.txt)."""

from __future__ import annotations

import html_to_markdown

from sift.fetch import htmlmd, robots, robotsrules

ROBOTS = "User-agent: *\nDisallow: /private\nDisallow: /*.json$\n"


def test_protego_still_exposes_its_rule_set_in_its_own_order():
    rules = robotsrules.read_rules(ROBOTS, "sift")
    assert {"/*.json$", "/private"} <= {pattern for _, pattern in rules.rules}
    assert robotsrules.first_match(rules, "/private/a") == (False, "/private")
    assert robots._quote_path("https://x.example/a b") == "/a%20b"


def test_html_to_markdown_still_takes_the_compiled_options_built_once():
    assert all(fields is not None for fields in htmlmd._NATIVE.values())
    html = '<p>See <a href="/a">a</a> and <b>b</b>.</p>'
    for options in (htmlmd._OPTIONS, htmlmd._INLINE):
        public = html_to_markdown.convert(
            html, htmlmd.replace(options, base_url="https://x.example/")
        ).content
        assert htmlmd._convert(html, options, "https://x.example/") == public


def test_multiprocessing_still_names_its_fork_server_pid_and_tracker_pipe():
    """The render pool counts the fork server's PSS in its budget by its pid, and keeps the
    resource tracker from starting through its pipe (docs/SECURITY.md §The render pool's
    memory budget); renamed, the server would silently fall out of the budget."""
    from multiprocessing import forkserver, resource_tracker

    assert hasattr(forkserver._forkserver, "_forkserver_pid")
    assert hasattr(resource_tracker._resource_tracker, "_fd")
