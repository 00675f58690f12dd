"""docs/SECURITY.md §Limits and isolation is the list of bounds: every table there names, for
each bound, a test file that exists, and every attack test file is named by some bound, so
neither the list nor the corpus can drift from the other.

Bound held: the list names only real tests, and names every file of the attack corpus.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "SECURITY.md"
_TEST_PATH = re.compile(r"tests/[\w/]+\.py")


def limits_section() -> str:
    return DOC.read_text("utf-8").split("## Limits and isolation", 1)[1]


def test_every_test_the_list_of_bounds_names_exists():
    named = set(_TEST_PATH.findall(limits_section()))
    assert named, "the list names no test"
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert not missing, missing


def test_every_attack_test_file_holds_a_listed_bound():
    named = set(_TEST_PATH.findall(DOC.read_text("utf-8")))
    corpus = {str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "attack").glob("test_*.py")}
    unlisted = sorted(corpus - named - {"tests/attack/test_caps_bounds_doc.py"})
    assert not unlisted, f"attack tests no bound in docs/SECURITY.md names: {unlisted}"
