"""Sift installs under a name of its own, and no instruction installs a bare name from the
package index, where `sift` is an unrelated project (docs/OPERATIONS.md §Installing)."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import distribution, requires
from pathlib import Path

from sift import about
from sift.cli import mcp

ROOT = Path(__file__).resolve().parents[2]
PIP_INSTALL = re.compile(r"pip install\s+((?:-[-\w]+\s+)*)(\S+)")
INSTRUCTIONS = [
    ROOT / "README.md",
    *(ROOT / "docs").glob("*.md"),
    *(ROOT / "skill").glob("*.md"),
    *(ROOT / "scripts").iterdir(),
    *(ROOT / "sift").rglob("*.py"),
]


def test_the_distribution_has_a_name_of_its_own_not_sift():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == about.DISTRIBUTION == "sift-fetch"
    assert distribution(about.DISTRIBUTION).version == project["version"] == about.version()


def test_no_instruction_installs_a_bare_name_from_the_index():
    """Every `pip install` names a path (a checkout, `.`, a wheel file), never a project; a
    bare name appears only in a warning against it ("never …", "not …")."""
    bare = []
    for path in INSTRUCTIONS:
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            for m in PIP_INSTALL.finditer(text):
                what = m.group(2).strip("'\"`")
                warned = re.search(r"\b(never|not)\b", text[max(0, m.start() - 100) : m.start()])
                if not what.startswith((".", "/", "dist/", "PATH", "{", "$")) and not warned:
                    bare.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert bare == []


def _installed_extras(script: str) -> set[str]:
    line = next(ln for ln in script.splitlines() if "pip install" in ln and "-e" in ln)
    extras = re.search(r"-e '\.\[([\w,]+)\]'", line)
    return set(extras.group(1).split(",")) if extras else set()


def test_the_readme_run_command_installs_the_mcp_sdk():
    """`bash scripts/run` must leave `sift mcp` working: its install pulls in the SDK."""
    extras = _installed_extras((ROOT / "scripts" / "run").read_text())
    bringing_mcp = {
        re.search(r"extra == \"(\w+)\"", r).group(1)
        for r in requires(about.DISTRIBUTION) or []
        if r.startswith("mcp")
    }
    assert extras & bringing_mcp
    assert "mcp" in _installed_extras((ROOT / "scripts" / "test").read_text())


def test_a_missing_mcp_sdk_names_the_checkout_install_not_the_index(monkeypatch, capsys):
    real = mcp.importlib.util.find_spec
    monkeypatch.setattr(
        mcp.importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    assert mcp.run(mcp.argparse.Namespace(print_config=None)) == 2
    err = capsys.readouterr().err
    assert f"-m pip install -e '{ROOT}[mcp]'" in err
    assert "pip install sift" in err and "unrelated" in err  # the warning, not an instruction
