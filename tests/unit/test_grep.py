"""grep: numbered matching lines with context, RE2 semantics, bounded output."""

from __future__ import annotations

import time

import pytest

from sift.errors import InvalidTarget
from sift.fetch.grep import MAX_LINE, grep

TEXT = "\n".join(f"line {n} {'tide' if n in (3, 4, 9) else 'calm'}" for n in range(1, 13))


def test_matching_lines_are_numbered_from_one_with_context():
    r = grep(TEXT, "tide")
    assert r.matches == 3
    assert r.content.split("\n") == [
        "2- line 2 calm",
        "3: line 3 tide",
        "4: line 4 tide",
        "5- line 5 calm",
        "--",
        "8- line 8 calm",
        "9: line 9 tide",
        "10- line 10 calm",
    ]


def test_adjacent_groups_merge_without_separator():
    r = grep(TEXT, r"line (3|6) ")
    assert "--" not in r.content.split("\n")
    assert r.content.split("\n")[0] == "2- line 2 calm"
    assert r.content.split("\n")[-1] == "7- line 7 calm"


def test_context_zero_shows_only_matches():
    assert (
        grep(TEXT, "tide", context=0).content
        == "3: line 3 tide\n4: line 4 tide\n--\n9: line 9 tide"
    )


def test_context_at_the_edges_of_the_content():
    r = grep("first\nsecond\nthird", "first|third")
    assert r.content == "1: first\n2- second\n3: third"


def test_no_match_is_empty_content_and_zero_matches():
    r = grep(TEXT, "storm")
    assert (r.content, r.matches) == ("", 0)


def test_inline_flag_makes_pattern_case_insensitive():
    assert grep("Tide\ntide\nTIDE", "(?i)tide", context=0).matches == 3
    assert grep("Tide\ntide\nTIDE", "tide", context=0).matches == 1


def test_anchors_work_per_line():
    assert grep("a tide\ntide a\ntide", "^tide$", context=0).content == "3: tide"


@pytest.mark.parametrize("pattern", ["(unclosed", "(?<=look)behind", r"(a)\1", "*start"])
def test_bad_pattern_is_invalid_target_with_re2_message(pattern):
    with pytest.raises(InvalidTarget) as e:
        grep(TEXT, pattern)
    assert e.value.status == 400
    assert e.value.msg.startswith("grep: bad pattern: ")
    assert len(e.value.msg) > len("grep: bad pattern: ")


def test_matches_past_the_cap_are_counted_not_shown():
    text = "\n".join("hit" for _ in range(50))
    r = grep(text, "hit", context=0, max_matches=10)
    assert r.matches == 50
    lines = r.content.split("\n")
    assert lines[:10] == [f"{n}: hit" for n in range(1, 11)]
    assert lines[-1] == "[40 more matching lines not shown; narrow the pattern]"


def test_long_line_is_cut_around_the_match():
    line = "x" * 5000 + "NEEDLE" + "y" * 5000
    out = grep(line, "NEEDLE").content
    assert "NEEDLE" in out
    assert len(out) < MAX_LINE + 20
    assert out.startswith("1: …") and out.endswith("…")


@pytest.mark.timeout(20)
@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(x+x+)+y", r"(a|aa)*c", r"^(a|a?)+$"])
def test_catastrophic_pattern_runs_in_linear_time(pattern):
    """A backtracking engine would never finish these; RE2 stays close to a trivial scan."""
    big = "a" * 5_000_000 + "!"
    t0 = time.perf_counter()
    grep(big, "zzz")
    trivial = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = grep(big, pattern)
    hostile = time.perf_counter() - t0
    assert r.matches in (0, 1)
    assert hostile < max(trivial, 0.01) * 200
