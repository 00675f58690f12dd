"""The CLI never writes a page's terminal controls to a terminal (docs/SECURITY.md §Terminal
output): OSC 52 (clipboard), OSC 0 (title), a screen clear and OSC 8 (links) come out as
visible escapes in every mode, with `--json` and in `sift batch status --format md`; written
to a pipe, the content is left as the page sent it.

Bound held: no C0 control but newline and tab, no DEL and no C1 control in what a terminal
receives.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest

from tests.attack.caps_site import HostileSite
from tests.bombs import TERMINAL_CONTROLS
from tests.e2e.procs import ROOT, SiftProcs, cli_env, wait_for_job_status

pytestmark = pytest.mark.e2e

ATTACK = TERMINAL_CONTROLS
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MODES = ("clean", "markdown", "text", "raw", "links")


@pytest.fixture(scope="module")
def hostile():
    site = HostileSite().start()
    words = "The harbour wall will be rebuilt over three summers after the storms. " * 8
    site.add("/page.txt", f"Title line\n\n{words}{ATTACK}{words}\n", "text/plain")
    site.add(
        "/page.html",
        f"<html><head><title>t{ATTACK}</title></head><body><article><h1>Head{ATTACK}</h1>"
        f"<p>{words}{ATTACK}{words}</p><pre>{ATTACK}</pre>"
        f"<a href='https://example.org/a'>{ATTACK}link</a></article></body></html>",
    )
    yield site
    site.close()


@pytest.fixture(scope="module")
def api(hostile):
    with SiftProcs([hostile.port]) as procs:
        yield procs


def on_terminal(api, *args: str) -> str:
    """What `sift ARGS` writes to a pseudo-terminal, as text."""
    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sift", *args],
        stdin=subprocess.DEVNULL,
        stdout=sub,
        stderr=subprocess.PIPE,
        env=cli_env(api),
        cwd=ROOT,
    )
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        out += chunk
    proc.wait(60)
    os.close(main)
    assert proc.returncode == 0, proc.stderr.read()
    return out.decode("utf-8")


def no_controls(text: str) -> None:
    # The terminal turns "\n" into "\r\n" on its way out: that carriage return is its own.
    found = CONTROLS.findall(text.replace("\r\n", "\n"))
    assert not found, sorted(set(found))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("page", ["/page.txt", "/page.html"])
def test_a_pages_terminal_controls_never_reach_a_terminal_in_any_mode(api, hostile, mode, page):
    out = on_terminal(api, "fetch", hostile.url(page), "--mode", mode)
    no_controls(out)
    if page == "/page.txt" and mode in ("raw", "clean"):
        assert "\\u001b]52;c;" in out  # escaped, visible, not dropped


def test_json_on_a_terminal_escapes_them_and_stays_json(api, hostile):
    out = on_terminal(api, "fetch", hostile.url("/page.txt"), "--mode", "raw", "--json")
    no_controls(out)
    assert "\x1b]52" in json.loads(out.replace("\r\n", "\n"))["content"]


def test_batch_status_as_markdown_on_a_terminal_escapes_them(api, hostile):
    status, job = api.submit([hostile.url("/page.txt"), hostile.url("/page.html")])
    assert status == 202, job
    wait_for_job_status(api, job["job_id"])
    for fmt in ("md", "json"):
        no_controls(on_terminal(api, "batch", "status", job["job_id"], "--format", fmt))


def test_to_a_pipe_raw_content_is_the_bytes_the_page_sent(api, hostile):
    done = subprocess.run(
        [sys.executable, "-m", "sift", "fetch", hostile.url("/page.txt"), "--mode", "raw"],
        capture_output=True,
        env=cli_env(api),
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert ATTACK.encode() in done.stdout
