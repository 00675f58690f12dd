"""The `sift` command line against the real API and worker processes (docs/BATCH.md): live
progress, exit codes, result shaping, keys that take effect, and a missing worker."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.e2e.procs import ROOT, cli, cli_popen, wait_for_job_status, wait_until

pytestmark = pytest.mark.e2e


def urls(site, tag, *paths):
    sep = lambda p: "&" if "?" in p else "?"  # noqa: E731
    return [site.url(f"{p}{sep(p)}t={tag}") for p in paths]


def submitted(sift, *targets) -> str:
    out = cli(sift, "batch", "submit", "-", stdin=json.dumps(list(targets)))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["job_id"]


def events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- progress ---------------------------------------------------------------------------------


def test_progress_json_writes_each_finished_target_as_it_finishes_then_an_end_event(
    sift, site, tag
):
    job_id = submitted(sift, *urls(site, tag, "/article/1", "/status/404"), site.held(tag))
    proc = cli_popen(sift, "batch", "status", job_id, "--wait", "--progress", "json")
    try:
        seen: list[dict] = []
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            seen.append(json.loads(proc.stderr.readline()))
        # The third target is held by the site: the first two were reported while it waits.
        assert proc.poll() is None
        assert [(e["event"], e["idx"], e["status"]) for e in seen] == [
            ("target", 0, "done"),
            ("target", 1, "failed"),
        ]
        assert seen[1]["error"] == "upstream answered HTTP 404" and seen[1]["job_id"] == job_id
    finally:
        site.release(tag)
    out, err = proc.communicate(timeout=30)
    rest = events(err)
    assert [(e["event"], e.get("idx")) for e in rest] == [("target", 2), ("end", None)]
    assert rest[-1] | {"elapsed": 0} == {
        "event": "end",
        "job_id": job_id,
        "status": "partial",
        "targets_total": 3,
        "targets_done": 3,
        "targets_failed": 1,
        "elapsed": 0,
    }
    assert proc.returncode == 3 and json.loads(out)["status"] == "partial"


def test_without_a_terminal_progress_is_a_line_per_change_on_stderr(sift, site, tag):
    job_id = submitted(sift, *urls(site, tag, "/article/2", "/article/3"))
    out = cli(sift, "batch", "status", job_id, "--wait", "--no-results")
    assert out.returncode == 0 and json.loads(out.stdout)["status"] == "done"
    lines = out.stderr.splitlines()
    assert lines and all(line.startswith("sift: ") for line in lines)
    assert lines[-1].startswith("sift: done: 2 of 2 finished (2 ok, 0 failed)")
    assert len(lines) == len(set(lines))  # a line only when something changed


# -- exit codes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("paths", "status", "code"),
    [
        (["/article/4"], "done", 0),
        (["/article/5", "/status/404"], "partial", 3),
        (["/status/404", "/status/410"], "failed", 4),
    ],
)
def test_the_exit_code_says_how_the_job_ended(sift, site, tag, paths, status, code):
    job_id = submitted(sift, *urls(site, tag, *paths))
    for verb in (["--wait"], []):  # waiting, then reading the ended job again
        out = cli(sift, "batch", "status", job_id, *verb, "--no-results", "--progress", "none")
        assert (out.returncode, json.loads(out.stdout)["status"]) == (code, status), out.stderr


def test_a_cancelled_job_exits_5(sift, site, tag):
    job_id = submitted(sift, site.held(tag), *urls(site, tag, "/article/6"))
    assert cli(sift, "batch", "cancel", job_id).returncode == 0
    site.release(tag)
    out = cli(sift, "batch", "status", job_id, "--wait", "--progress", "none")
    assert out.returncode == 5 and json.loads(out.stdout)["status"] == "cancelled"


def test_submit_wait_with_json_progress_writes_only_events_on_stderr(sift, site, tag):
    text = "\n".join(urls(site, tag, "/article/11", "/article/12"))
    out = cli(sift, "batch", "submit", "-", "--wait", "--progress", "json", stdin=text)
    assert out.returncode == 0, out.stderr
    got = events(out.stderr)
    assert [e["event"] for e in got] == ["submitted", "target", "target", "end"]
    assert got[0]["job_id"] == got[-1]["job_id"] == json.loads(out.stdout)["job_id"]


def test_submit_wait_prints_the_results_and_exits_by_the_jobs_status(sift, site, tag):
    text = "\n".join(urls(site, tag, "/article/7", "/status/404"))
    out = cli(sift, "batch", "submit", "-", "--wait", "--format", "md", stdin=text)
    assert out.returncode == 3, out.stderr
    assert out.stdout.startswith("# Job ")
    assert "## 1. " in out.stdout and "(failed)\n\nerror: upstream answered HTTP 404" in out.stdout


# -- result shaping ---------------------------------------------------------------------------


def test_out_writes_a_file_per_done_target_named_by_idx_and_host_and_an_index(
    sift, site, tag, tmp_path
):
    article, plain, data, gone = urls(
        site, tag, "/article/8", "/plain.txt", "/data.json", "/status/404"
    )
    job_id = submitted(
        sift,
        article,
        {"url": plain, "mode": "text"},
        {"url": data, "jq": ".items[].name"},
        gone,
    )
    wait_for_job_status(sift, job_id)
    out = cli(sift, "batch", "status", job_id, "--out", str(tmp_path / "r"))
    assert out.returncode == 3, out.stderr
    host = site.host.replace(":", "_")
    names = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert names == [f"00-{host}.md", f"01-{host}.txt", f"02-{host}.json", "index.json"]
    article_md = (tmp_path / "r" / f"00-{host}.md").read_text()
    assert article_md.startswith("# Harbour breakwater to be rebuilt (8)")
    assert "alpha" in (tmp_path / "r" / f"02-{host}.json").read_text()
    index = json.loads((tmp_path / "r" / "index.json").read_text())
    assert index == json.loads(out.stdout)
    assert [t.get("file") for t in index["targets"]] == [*names[:3], None]
    assert index["targets"][3]["error"] == "upstream answered HTTP 404"
    assert (index["status"], index["targets_done"], index["targets_failed"]) == ("partial", 4, 1)


def test_target_shows_one_target_in_either_format(sift, site, tag):
    job_id = submitted(sift, *urls(site, tag, "/article/9", "/status/404"))
    wait_for_job_status(sift, job_id)
    one = json.loads(cli(sift, "batch", "status", job_id, "--target", "1").stdout)
    assert one["idx"] == 1 and one["status"] == "failed" and one["hint"] == "recover"
    md = cli(sift, "batch", "status", job_id, "--target", "0", "--format", "md").stdout
    assert md.startswith("## 0. ") and "(done)" in md
    assert "Harbour breakwater to be rebuilt (9)" in md
    out = cli(sift, "batch", "status", job_id, "--target", "5")
    assert out.returncode == 2 and out.stderr.strip() == (
        "sift: --target 5: the job's targets are 0 to 1"
    )


def test_a_closed_stdout_ends_the_command_quietly(sift, site, tag):
    job_id = submitted(sift, *urls(site, tag, *[f"/big?words=20000&n={i}" for i in range(4)]))
    wait_for_job_status(sift, job_id)
    proc = cli_popen(sift, "batch", "status", job_id, "--format", "md")
    proc.stdout.read(10)
    proc.stdout.close()
    assert proc.wait(30) == 141
    assert proc.stderr.read() == ""


# -- keys -------------------------------------------------------------------------------------


def _keys(procs, *args):
    """`sift keys ARGS --config` of `procs`, as an operator runs it next to the live API."""
    return subprocess.run(
        [sys.executable, "-m", "sift", "keys", *args, "--config", str(procs.config_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_keys_added_and_revoked_take_effect_without_restarting_the_api(fresh):
    procs = fresh()
    added = _keys(procs, "add", "carol")
    assert added.returncode == 0, added.stderr
    key = added.stdout.splitlines()[-1]
    assert str(procs.state_dir / "keys.toml") in added.stderr
    procs.keys["carol"] = key
    assert procs.call("GET", "/v1/batch", who="carol")[0] == 200

    listed = _keys(procs, "list", "--json")
    assert [(k["name"], k["class"]) for k in json.loads(listed.stdout)] == [
        ("alice", "fleet"),
        ("bob", "fleet"),
        ("spy", "restricted"),
        ("carol", "fleet"),
    ]
    assert key not in listed.stdout and "sha256" not in listed.stdout

    revoked = _keys(procs, "revoke", "carol")
    assert revoked.returncode == 0, revoked.stderr
    assert procs.call("GET", "/v1/batch", who="carol")[0] == 401
    assert procs.call("GET", "/v1/batch", who="alice")[0] == 200


def test_an_unreadable_keys_file_keeps_the_last_good_keys_and_logs_why(fresh):
    procs = fresh()
    mark = procs.log_mark()
    (procs.state_dir / "keys.toml").write_text("this is [not toml\n")
    assert procs.call("GET", "/v1/batch", who="alice")[0] == 200
    wait_until(
        lambda: any(
            ln.get("msg") == "keys file not reloaded; the last good keys stay in force"
            for ln in procs.log_lines(mark)
        ),
        what="the keys-file warning",
    )


# -- no worker --------------------------------------------------------------------------------


def test_without_a_worker_submit_and_wait_say_so_and_the_job_runs_once_one_starts(fresh, site, tag):
    procs = fresh(start=False)
    procs.start_api()
    out = cli(procs, "batch", "submit", "-", stdin="\n".join(urls(site, tag, "/article/10")))
    assert out.returncode == 0, out.stderr
    sub = json.loads(out.stdout)
    assert sub["worker"] == "down" and "no worker is running" in sub["warning"]
    assert "no worker is running" in out.stderr
    proc = cli_popen(procs, "batch", "status", sub["job_id"], "--wait", "--progress", "plain")
    first = proc.stderr.readline()
    assert first == "sift: no worker is running; the job is queued and starts when one does\n"
    assert proc.poll() is None
    procs.start_worker()
    out_text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and json.loads(out_text)["status"] == "done"
    assert json.loads(out_text)["worker"] == "up"


def test_a_one_target_job_is_one_target_and_its_hint_says_what_to_do(sift, site, tag):
    """docs/BATCH.md §Hints for people: no "1 targets", and a hint is a command, not a word."""
    text = site.url(f"/status/404?{tag}")
    out = cli(
        sift, "batch", "submit", "-", "--wait", "--format", "md", "--progress", "plain", stdin=text
    )
    assert out.returncode == 4, out.stderr
    assert out.stderr.splitlines()[0].endswith(" queued, 1 target")
    assert 'hint: recover: the live page failed: submit the target again with "recover": true' in (
        out.stdout
    )
    text = "\n".join(urls(site, tag, "/article/8", "/status/404"))  # partial: reused
    assert cli(sift, "batch", "submit", "-", "--wait", stdin=text).returncode == 3
    again = cli(sift, "batch", "submit", "-", "--wait", "--progress", "plain", stdin=text)
    notes = [ln for ln in again.stderr.splitlines() if "submitted before" in ln]
    assert len(notes) == 1 and "/v1/" not in notes[0] and "{id}" not in notes[0]
    assert "'sift batch retry " in notes[0]
