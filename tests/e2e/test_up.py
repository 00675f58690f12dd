"""`sift up`: one command runs the API and the worker, prints a usable key, and stops both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.procs import free_port, http, short_tmp, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def up():
    home = short_tmp()
    port = free_port()
    (home / "sift.toml").write_text(f'[server]\nport = {port}\n[store]\nstate_dir = "st"\n')
    out = home / "up.out"
    env = {k: v for k, v in os.environ.items() if k != "SIFT_CONFIG"}
    with open(out, "wb") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sift", "up", "--config", str(home / "sift.toml")],
            cwd=home,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def healthy():
        try:
            return http("GET", base + "/healthz")[1]["worker"]["alive"]
        except OSError:
            return False

    kids: list[int] = []
    try:
        wait_until(healthy, timeout=30, what="sift up healthy")
        kids = children(proc.pid)
        yield proc, base, out.read_text()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in kids:  # never leave an orphaned API or worker behind
            if os.path.exists(f"/proc/{pid}") and not _zombie(pid):
                os.kill(pid, signal.SIGKILL)


def children(pid: int) -> list[int]:
    path = f"/proc/{pid}/task/{pid}/children"
    try:
        with open(path) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def test_sift_up_runs_api_and_worker_and_prints_a_usable_key(up):
    _, base, text = up
    line = next(ln for ln in text.splitlines() if "SIFT_KEY=" in ln)
    key = line.split("SIFT_KEY=", 1)[1].strip()
    status, body = http("GET", base + "/v1/batch/" + "0" * 32, key=key)
    assert (status, body["error"]) == (404, "job not found")
    assert "batch submit -" in text and "batch status JOB_ID --wait" in text


def test_sift_up_greets_with_a_ready_mcp_host_configuration(up):
    """docs/MCP.md §Host configuration: the entry names the absolute command and the new key."""
    _, base, text = up
    key = next(ln for ln in text.splitlines() if "SIFT_KEY=" in ln).split("SIFT_KEY=", 1)[1]
    start = text.index('  {\n    "mcpServers"')
    entry = json.JSONDecoder().raw_decode(text[start:].lstrip())[0]["mcpServers"]["sift"]
    assert os.path.isabs(entry["command"]) and os.access(entry["command"], os.X_OK)
    assert entry["args"] == ["mcp"]
    assert entry["env"] == {"SIFT_URL": base, "SIFT_KEY": key.strip()}


def test_ctrl_c_stops_both_processes_and_exits_0(up):
    proc, _, _ = up
    kids = children(proc.pid)
    assert len(kids) == 2
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0
    for pid in kids:
        wait_until(
            lambda p=pid: not os.path.exists(f"/proc/{p}") or _zombie(p),
            timeout=10,
            what=f"child {pid} gone",
        )


def test_sift_up_exits_non_zero_when_a_child_dies(up):
    proc, _, _ = up
    kids = children(proc.pid)
    os.kill(kids[-1], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.returncode not in (None, 0)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except OSError:
        return True
