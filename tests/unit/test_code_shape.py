"""Functions one can read (docs/ARCHITECTURE.md §Function size): no function in `sift/` or
`worker/` runs over 60 lines, tables of data excepted."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 60
# Functions that are tables of data, not decisions: "path:name" -> why. Empty today; an entry
# here must be a table (an argparse parser list, a mapping written as code), never logic.
DATA_TABLES: dict[str, str] = {}


def _long_functions(root: Path) -> list[str]:
    found = []
    for top in ("sift", "worker"):
        for path in sorted((root / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                lines = node.end_lineno - node.lineno + 1
                where = f"{path.relative_to(root).as_posix()}:{node.name}"
                if lines > MAX_LINES and where not in DATA_TABLES:
                    found.append(f"{where} ({lines} lines)")
    return found


def test_no_function_in_sift_or_worker_runs_over_60_lines():
    assert _long_functions(ROOT) == []


def test_the_check_finds_a_long_function(tmp_path):
    (tmp_path / "worker").mkdir()
    (tmp_path / "sift").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    (tmp_path / "sift" / "long.py").write_text(f"def long():\n{body}", encoding="utf-8")
    (tmp_path / "worker" / "short.py").write_text("def short():\n    pass\n", encoding="utf-8")
    assert _long_functions(tmp_path) == ["sift/long.py:long (61 lines)"]


def test_the_allow_list_names_functions_that_exist():
    names = set()
    for top in ("sift", "worker"):
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{path.relative_to(ROOT).as_posix()}:{node.name}")
    assert set(DATA_TABLES) <= names
