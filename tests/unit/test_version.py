"""One version, moved with each release (CHANGELOG.md): `sift --version`, the OpenAPI document
and the package metadata agree, and the changelog has a section for it in the agreed form."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from sift import about

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
RELEASE = re.compile(r"^## \[([^\]]+)\] — (\S+)$", re.M)
KINDS = ("Added", "Changed", "Fixed", "Security")


def sections() -> dict[str, str]:
    heads = list(RELEASE.finditer(CHANGELOG))
    ends = [m.start() for m in heads[1:]] + [len(CHANGELOG)]
    return {m.group(1): CHANGELOG[m.end() : end] for m, end in zip(heads, ends, strict=True)}


def test_sift_version_the_openapi_document_and_the_metadata_agree():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = subprocess.run(
        [sys.executable, "-m", "sift", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"sift {about.version()}" == f"sift {project['version']}"
    shipped = json.loads((ROOT / "sift" / "api" / "openapi.json").read_text())
    assert shipped["info"]["version"] == project["version"]


def test_the_changelog_has_the_current_version_and_every_release_in_the_agreed_form():
    found = sections()
    version = about.version()
    heads = [m.groups() for m in RELEASE.finditer(CHANGELOG)]
    if version.endswith(".dev0"):  # between releases: the entries wait under Unreleased
        assert heads[0] == ("Unreleased", version.removesuffix(".dev0"))
    else:
        assert heads[0][0] == version and re.fullmatch(r"\d{4}-\d\d-\d\d", heads[0][1])
    released = [tuple(map(int, h[0].split("."))) for h in heads if h[0] != "Unreleased"]
    assert released == sorted(released, reverse=True) and len(set(released)) == len(released)
    for name, body in found.items():
        kinds = re.findall(r"^### (.+)$", body, re.M)
        assert kinds[-1] == "Upgrade notes", name
        assert kinds[:-1] and set(kinds[:-1]) <= set(KINDS), (name, kinds)
        assert kinds[:-1] == [k for k in KINDS if k in kinds], name  # the agreed order
