"""`sift batch status --out DIR` never follows a link planted in DIR (docs/SECURITY.md
§Terminal output): each file is written new and renamed over its name, so a symbolic link
named like a result file or `index.json` is replaced and its target left alone. Real API,
worker and CLI processes.

Bound held: no byte written outside DIR; every file in DIR a regular file.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.attack.caps_site import HostileSite
from tests.e2e.procs import SiftProcs, cli, wait_for_job_status

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    site.add(
        "/a", "<html><body><article><p>" + "Harbour words. " * 40 + "</p></article></body></html>"
    )
    yield site
    site.close()


@pytest.fixture(scope="module")
def api(hostile):
    with SiftProcs([hostile.port]) as procs:
        yield procs


def test_out_dir_replaces_planted_links_instead_of_following_them(api, hostile, tmp_path):
    status, job = api.submit([hostile.url("/a")])
    assert status == 202, job
    wait_for_job_status(api, job["job_id"])
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("keep me\n")
    planted = [f"00-127.0.0.1_{hostile.port}.md", "index.json"]
    for name in planted:
        (out / name).symlink_to(victim)
    done = cli(api, "batch", "status", job["job_id"], "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me\n"
    for name in planted:
        assert not (out / name).is_symlink() and (out / name).is_file()
    index = json.loads((out / "index.json").read_text())
    assert index["targets"][0]["file"] == planted[0]
    assert "Harbour words." in (out / planted[0]).read_text()
    assert sorted(os.listdir(out)) == sorted(planted)  # no temporary file left behind
