"""Content Signals in robots.txt as pure functions (docs/WORKER.md §Content Signals)."""

from __future__ import annotations

import time

from sift.fetch import content_signals as cs


def verdict(text: str, path: str = "/a", token: str = "Sift") -> bool | None:
    return cs.allowed(cs.parse(text), path, token)


def test_ai_input_no_in_the_star_group_forbids_sift():
    text = "User-agent: *\nContent-Signal: search=yes, ai-train=no, ai-input=no\nAllow: /\n"
    assert verdict(text) is False
    assert cs.refusal(cs.parse(text), "/a", "Sift") == "ai-input=no"


def test_a_site_that_says_nothing_or_yes_allows_it():
    assert verdict("User-agent: *\nDisallow: /x\n") is None
    assert verdict("User-agent: *\nContent-Signal: ai-train=no\n") is None
    assert verdict("User-agent: *\nContent-Signal: ai-input=yes\n") is True
    assert cs.refusal(cs.parse(""), "/", "Sift") is None


def test_sifts_own_group_wins_over_the_star_group():
    text = (
        "User-agent: *\nContent-Signal: ai-input=no\n\n"
        "User-agent: other\nUser-agent: SIFT\nContent-Signal: ai-input=yes\n"
    )
    assert verdict(text) is True
    assert verdict(text, token="elsebot") is False


def test_lines_before_any_group_apply_unless_the_group_says_otherwise():
    assert verdict("Content-Signal: ai-input=no\nUser-agent: *\nDisallow:\n") is False
    text = "Content-Signal: ai-input=no\nUser-agent: *\nContent-Signal: ai-input=yes\n"
    assert verdict(text) is True


def test_a_path_scoped_line_covers_only_its_paths_and_the_longest_wins():
    text = (
        "User-agent: *\nContent-Signal: /archive/ ai-input=no\n"
        "Content-Signal: /archive/open/ ai-input=yes\n"
    )
    assert verdict(text, "/news/1") is None
    assert verdict(text, "/archive/1") is False
    assert verdict(text, "/archive/open/1") is True


def test_unknown_values_uses_and_malformed_pairs_are_ignored():
    text = "User-agent: *\nContent-Signal: ai-input=maybe, =no, ai input=no, AI-Input = NO\n"
    assert verdict(text) is False  # only the last pair is well formed
    assert verdict("User-agent: *\nContent-signal ai-input=no\n") is None  # no colon
    assert verdict("User-agent: *\nContent-Signal: ai-input=no # trailing\n") is False
    assert verdict("User-agent: *\n# Content-Signal: ai-input=no\n") is None


def test_a_hostile_file_is_read_only_up_to_the_caps_and_quickly():
    pairs = ", ".join(f"u{i}=no" for i in range(5_000)) + ", ai-input=no"
    text = "User-agent: *\n" + f"Content-Signal: {pairs}\n" + "Content-Signal: u=no\n" * 30_000
    start = time.perf_counter()
    parsed = cs.parse(text)
    assert time.perf_counter() - start < 2.0  # generous under a loaded machine
    assert len(parsed.lines) <= cs.MAX_LINES_KEPT
    assert all(len(ln.uses) <= cs.MAX_PAIRS for ln in parsed.lines)
    assert cs.allowed(parsed, "/", "Sift") is None  # the ai-input pair is past MAX_PAIRS
    late = "User-agent: *\n" + "#" * cs.MAX_CHARS + "\nContent-Signal: ai-input=no\n"
    assert verdict(late) is None  # past MAX_CHARS: not read
