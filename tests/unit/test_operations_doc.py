"""docs/OPERATIONS.md cannot drift from the code: its config table and metric names are checked.

The config table is rendered from `sift.config.describe()`; print a fresh one with
`.venv/bin/python -m tests.unit.test_operations_doc` and paste it between the markers.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from sift import config
from sift.constants import JOB_OUTCOMES, TARGET_OUTCOMES
from sift.metrics import FETCH_OUTCOMES, ApiMetrics
from sift.store import BatchSeries, batch_sql
from sift.store.db import Database
from tests.dbview import DbView

DOC = Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"
HEADER = ("| Key | Default | Meaning |", "|---|---|---|")
_UNITS = (("h", 3600), ("m", 60), ("s", 1))
_SIZES = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def _kind(block: str, key: str) -> str:
    cls = config.BLOCKS[block]
    return next(f.metadata["kind"] for f in fields(cls) if config.toml_key(f) == key)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render_default(block: str, key: str, default) -> str:
    """The default as the TOML value an operator would write."""
    kind = _kind(block, key)
    if kind == "duration":
        for unit, seconds in _UNITS:
            if default and default % seconds == 0:
                return f'"{_number(default / seconds)}{unit}"'
        return _number(default)
    if kind == "size":
        for unit, n in _SIZES:
            if default and default % n == 0:
                return f'"{default // n}{unit}"'
        return str(default)
    if kind in ("str", "path"):
        return '"' + str(default).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if kind == "ports":
        return "[" + ", ".join(str(p) for p in default) + "]"
    if kind == "networks":
        return "[" + ", ".join(f'"{n}"' for n in default) + "]"
    return str(default)


def _path_default(value) -> str:
    return "" if str(value) == "." else str(value)


def config_rows() -> list[tuple[str, str, str]]:
    rows = []
    for block, key, default, help_ in config.describe():
        if _kind(block, key) == "path":
            default = _path_default(default)
        rows.append((f"`[{block}] {key}`", f"`{render_default(block, key, default)}`", help_))
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def config_table() -> str:
    lines = list(HEADER)
    lines += [f"| {k} | {d} | {_cell(h)} |" for k, d, h in config_rows()]
    return "\n".join(lines)


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _doc_rows() -> list[tuple[str, str, str]]:
    text = _doc()
    assert START in text and END in text, f"{DOC.name} lost its config-table markers"
    body = text.split(START, 1)[1].split(END, 1)[0].strip().splitlines()
    assert tuple(body[:2]) == HEADER
    rows = []
    for line in body[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        assert len(cells) == 3, f"not a three-column row: {line!r}"
        rows.append((cells[0], cells[1], cells[2].replace("\\|", "|")))
    return rows


def test_every_setting_is_in_the_operations_doc():
    documented = {k for k, _, _ in _doc_rows()}
    missing = [k for k, _, _ in config_rows() if k not in documented]
    assert missing == [], f"add these to {DOC.name} (python -m tests.unit.test_operations_doc)"


def test_the_operations_doc_lists_no_setting_that_does_not_exist():
    real = {k for k, _, _ in config_rows()}
    extra = [k for k, _, _ in _doc_rows() if k not in real]
    assert extra == []


def test_the_operations_doc_shows_each_setting_with_its_real_default_and_help():
    documented = {k: (d, h) for k, d, h in _doc_rows()}
    wrong = [
        (k, documented[k], (d, h))
        for k, d, h in config_rows()
        if k in documented and documented[k] != (d, h)
    ]
    assert wrong == []


def test_the_config_table_is_exactly_the_rendered_one_in_order():
    assert _doc_rows() == config_rows()


# Paths are resolved against the config file's folder, so only the other kinds round-trip.
_VALUES = [(b, k, d) for b, k, d, _ in config.describe() if _kind(b, k) != "path"]


@pytest.mark.parametrize(
    ("block", "key", "default"), _VALUES, ids=[f"{b}.{k}" for b, k, _ in _VALUES]
)
def test_each_documented_default_loads_back_as_that_default(block, key, default):
    raw = tomllib.loads(f"[{block}]\n{key} = {render_default(block, key, default)}\n")
    loaded = getattr(config.from_dict(raw), block)
    name = next(f.name for f in fields(config.BLOCKS[block]) if config.toml_key(f) == key)
    assert getattr(loaded, name) == default


# -- metrics -------------------------------------------------------------------------------


def _families(tmp_path: Path) -> dict[str, str]:
    """Every `sift_*` family one scrape shows, with its type (a real store behind it)."""
    Database(tmp_path / "sift.db").close()
    rows = DbView(tmp_path / "sift.db")
    series = BatchSeries(rows.counters(), *rows.read(batch_sql.gauges))
    text = ApiMetrics().render(series).decode()
    fams = dict(re.findall(r"^# TYPE (sift_\w+) (\w+)$", text, re.M))
    # prometheus-client's creation-time companions are not series of ours.
    return {n: t for n, t in fams.items() if not n.endswith("_created")}


def test_every_metric_family_is_in_the_operations_doc(tmp_path):
    doc = _doc()
    missing = [n for n in _families(tmp_path) if f"`{n}" not in doc]
    assert missing == []


def test_the_operations_doc_names_no_metric_that_does_not_exist(tmp_path):
    fams = _families(tmp_path)
    suffixes = ("", "_bucket", "_sum", "_count")
    known = {f + s for f in fams for s in suffixes}
    named = set(re.findall(r"\bsift_(?:batch|fetch)_[a-z0-9_]+", _doc()))
    assert sorted(named - known) == []


def test_every_outcome_label_is_in_the_operations_doc():
    doc = _doc()
    for outcome in {*JOB_OUTCOMES, *TARGET_OUTCOMES, *FETCH_OUTCOMES, "other"}:
        assert f"`{outcome}`" in doc, outcome


if __name__ == "__main__":
    print(config_table())
