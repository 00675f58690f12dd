"""The `sift` command line: argument parsing, target files, and errors as one clear line.

Client verbs run in-process (`sift.cli.main.main`) against the real API app served on a
loopback port by a thread, which fetches the loopback test site; no worker is needed here (the
end-to-end suite drives the CLI against both real processes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from importlib.metadata import version

import pytest
from aiohttp import web

from sift import about, config
from sift.api.app import create_app
from sift.auth import add_key
from sift.cli import client, targets
from sift.cli.main import build_parser, main
from tests.e2e.procs import free_port, serve_site

# -- argument parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve"], {"verb": "serve", "config": None, "host": None, "port": None}),
        (
            ["serve", "--config", "s.toml", "--host", "0.0.0.0", "--port", "9000"],
            {"config": "s.toml", "host": "0.0.0.0", "port": 9000},
        ),
        (["up", "--config", "s.toml"], {"verb": "up", "config": "s.toml"}),
        (
            ["keys", "add", "agent"],
            {"keys_verb": "add", "name": "agent", "workspace": "default", "restricted": False},
        ),
        (
            ["keys", "add", "agent", "--workspace", "w1", "--restricted", "--config", "c"],
            {"workspace": "w1", "restricted": True, "config": "c"},
        ),
        (
            ["fetch", "http://a.test/"],
            {
                "url": "http://a.test/",
                "mode": None,
                "question": None,
                "pages": None,
                "grep": None,
                "jq": None,
                "context": None,
                "recover": None,
                "links": None,
                "images": None,
                "json": False,
            },
        ),
        (["fetch", "http://a.test/", "--mode", "links"], {"mode": "links"}),
        (["fetch", "http://a.test/", "--question", "Who?"], {"question": "Who?"}),
        (["fetch", "http://a.test/", "--pages", "1-3,7"], {"pages": "1-3,7"}),
        (["fetch", "http://a.test/", "--grep", "a|b"], {"grep": "a|b"}),
        (["fetch", "http://a.test/", "--jq", ".items[]"], {"jq": ".items[]"}),
        (["fetch", "http://a.test/", "--context"], {"context": True}),
        (["fetch", "http://a.test/", "--no-context"], {"context": False}),
        (["fetch", "http://a.test/", "--recover", "--json"], {"recover": True, "json": True}),
        (
            ["fetch", "http://a.test/", "--no-links", "--no-images"],
            {"links": False, "images": False},
        ),
        (["batch", "submit", "-"], {"batch_verb": "submit", "file": "-"}),
        (["batch", "submit", "urls.txt"], {"file": "urls.txt"}),
        (
            ["batch", "status", "abc"],
            {"batch_verb": "status", "job_id": "abc", "wait": False, "no_results": False},
        ),
        (["batch", "status", "abc", "--wait", "--no-results"], {"wait": True, "no_results": True}),
        (["batch", "cancel", "abc"], {"batch_verb": "cancel", "job_id": "abc"}),
    ],
)
def test_each_verb_parses_its_arguments(argv, expected):
    args = build_parser().parse_args(argv)
    assert {k: getattr(args, k) for k in expected} == expected
    assert callable(args.run)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nope"],
        ["fetch"],
        ["fetch", "http://a.test/", "--mode", "pdf"],
        ["fetch", "http://a.test/", "--context", "--no-context"],
        ["batch"],
        ["batch", "submit"],
        ["batch", "status"],
        ["batch", "cancel"],
        ["batch", "status", "abc", "--wait=5"],
        ["keys"],
        ["keys", "add"],
        ["serve", "--port", "eighty"],
    ],
)
def test_usage_errors_exit_2_with_a_message(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


# -- target files -----------------------------------------------------------------------------


def test_a_json_list_of_urls_and_objects_becomes_targets():
    text = '["http://a.test/1", {"url": "http://a.test/2", "mode": "text"}]'
    assert targets.parse_targets(text) == [
        {"url": "http://a.test/1"},
        {"url": "http://a.test/2", "mode": "text"},
    ]


def test_a_targets_object_is_read_like_the_wire_body():
    text = '\n  {"targets": [{"url": "http://a.test/", "grep": "x"}, "http://b.test/"]}\n'
    assert targets.parse_targets(text) == [
        {"url": "http://a.test/", "grep": "x"},
        {"url": "http://b.test/"},
    ]


def test_one_url_per_line_skips_blank_lines_and_comments():
    text = "# my list\nhttp://a.test/1\n\n   http://a.test/2  \n  # later\r\nhttp://a.test/3\r\n"
    assert targets.parse_targets(text) == [
        {"url": "http://a.test/1"},
        {"url": "http://a.test/2"},
        {"url": "http://a.test/3"},
    ]


@pytest.mark.parametrize(
    "text", ['["http://a.test/"', '{"urls": []}', '{"targets": "http://a.test/"}', "[1"]
)
def test_a_broken_json_target_file_is_a_clear_error(text):
    with pytest.raises(client.ClientError):
        targets.parse_targets(text)


def test_an_empty_file_has_no_targets():
    assert targets.parse_targets("\n# nothing yet\n\n") == []


# -- against the real API ---------------------------------------------------------------------


class ApiThread:
    """The API app (`create_app`) on a loopback port, served by its own event-loop thread."""

    def __init__(self, cfg):
        self.loop = asyncio.new_event_loop()
        self.port = free_port()
        started = threading.Event()

        async def start():
            self.runner = web.AppRunner(create_app(cfg), access_log=None, shutdown_timeout=1)
            await self.runner.setup()
            await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

        def run():
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(start())
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert started.wait(15), "API thread did not start"

    def close(self):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def site():
    s = serve_site()
    yield s
    s.close()


@pytest.fixture(scope="module")
def api(site, tmp_path_factory):
    state = tmp_path_factory.mktemp("cli")
    cfg = config.from_dict(
        {
            "store": {"state_dir": str(state)},
            "guard": {"allow_networks": ["127.0.0.1/32"], "allowed_ports": [site.port]},
            "batch": {"jobs_per_caller": 50},
            "fetch": {"output_cap": 400},
        }
    )
    key = add_key(cfg.keys_file, "cli-agent")
    server = ApiThread(cfg)
    server.key = key
    server.url = f"http://127.0.0.1:{server.port}"
    yield server
    server.close()


@pytest.fixture
def env(api, monkeypatch):
    monkeypatch.setenv("SIFT_URL", api.url)
    monkeypatch.setenv("SIFT_KEY", api.key)
    return api


def run(argv, capsys, stdin=None, monkeypatch=None):
    if stdin is not None:
        import io

        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("sift: ")
    return err.strip()


def test_a_missing_sift_key_is_one_line_and_a_non_zero_exit(monkeypatch, capsys):
    monkeypatch.delenv("SIFT_KEY", raising=False)
    code, out, err = run(["fetch", "http://a.test/"], capsys)
    assert code != 0 and out == ""
    assert "SIFT_KEY is not set" in one_line(err)


def test_an_unreachable_sift_url_is_one_line_and_a_non_zero_exit(monkeypatch, capsys):
    port = free_port()  # nobody listens there
    monkeypatch.setenv("SIFT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("SIFT_KEY", "sk-anything")
    for argv in (["fetch", "http://a.test/"], ["batch", "status", "abc"]):
        code, out, err = run(argv, capsys)
        assert code == 1 and out == ""
        assert f"cannot reach http://127.0.0.1:{port}" in one_line(err)


@pytest.mark.parametrize("url", ["127.0.0.1:8077", "http://[::1", "ftp://127.0.0.1:21"])
def test_a_malformed_sift_url_is_one_line_and_a_non_zero_exit(monkeypatch, capsys, url):
    monkeypatch.setenv("SIFT_URL", url)
    monkeypatch.setenv("SIFT_KEY", "sk-anything")
    code, out, err = run(["batch", "status", "abc"], capsys)
    assert code != 0 and out == ""
    assert "SIFT_URL" in one_line(err)


def test_a_sift_url_that_is_not_sift_says_so_in_one_line(site, monkeypatch, capsys):
    monkeypatch.setenv("SIFT_URL", site.base)
    monkeypatch.setenv("SIFT_KEY", "sk-anything")
    code, out, err = run(["batch", "status", "abc"], capsys)
    assert code == 1 and out == ""
    assert "HTTP 404 without a Sift error (is SIFT_URL right?)" in one_line(err)


def test_an_unknown_key_is_the_servers_401_line(env, monkeypatch, capsys):
    monkeypatch.setenv("SIFT_KEY", "sk-not-a-key")
    code, _, err = run(["batch", "status", "abc"], capsys)
    assert code == 1 and one_line(err) == "sift: unknown API key (HTTP 401)"


def test_server_errors_pass_through_with_their_status_and_hint(env, site, capsys):
    code, _, err = run(["fetch", "http://127.0.0.1:22/"], capsys)
    assert code == 1
    assert one_line(err).startswith("sift: port 22 is not allowed") and "(HTTP 422)" in err
    code, _, err = run(["fetch", site.url("/status/404")], capsys)
    assert code == 1
    assert one_line(err) == (
        "sift: upstream answered HTTP 404 (HTTP 502); hint: recover: the live page failed: "
        "run it again with --recover to read its closest web-archive copy"
    )
    code, _, err = run(["batch", "status", "0" * 32], capsys)
    assert code == 1 and one_line(err) == "sift: job not found (HTTP 404)"


def test_a_job_id_with_odd_characters_is_sent_safely(env, capsys):
    code, _, err = run(["batch", "status", "a b/../c?x"], capsys)
    assert code == 1 and one_line(err) == "sift: job not found (HTTP 404)"
    code, _, err = run(["batch", "cancel", "../../healthz"], capsys)
    assert code == 1 and one_line(err) == "sift: job not found (HTTP 404)"


def test_submit_reports_the_servers_refusal_of_a_target(env, site, tmp_path, capsys):
    f = tmp_path / "urls.txt"
    f.write_text(f"{site.url('/article/1')}\nhttp://127.0.0.1:22/\n")
    code, out, err = run(["batch", "submit", str(f)], capsys)
    assert code == 1 and out == ""
    assert one_line(err).startswith("sift: target 1: port 22 is not allowed")
    f.write_text("\n".join(site.url(f"/article/{i}?over") for i in range(33)))
    code, _, err = run(["batch", "submit", str(f)], capsys)
    assert code == 1 and "too many targets: 33" in one_line(err)


def test_submit_of_a_missing_or_empty_file_is_one_line(env, tmp_path, capsys):
    """docs/BATCH.md §Exit codes: a targets file that is missing or empty is a usage problem."""
    code, _, err = run(["batch", "submit", str(tmp_path / "nope.txt")], capsys)
    assert code == 2 and "cannot read" in one_line(err)
    (tmp_path / "empty.txt").write_text("# nothing\n")
    code, _, err = run(["batch", "submit", str(tmp_path / "empty.txt")], capsys)
    assert code == 2 and one_line(err) == f"sift: no targets in {tmp_path / 'empty.txt'}"
    (tmp_path / "bad.json").write_text("[1, ")
    code, _, err = run(["batch", "submit", str(tmp_path / "bad.json")], capsys)
    assert code == 2 and "not valid JSON" in one_line(err)


def test_submit_prints_the_job_id_and_reused(env, site, capsys, monkeypatch):
    text = json.dumps({"targets": [site.url("/article/2?cli"), site.url("/data.json?cli")]})
    code, out, _ = run(["batch", "submit", "-"], capsys, stdin=text, monkeypatch=monkeypatch)
    assert code == 0
    first = json.loads(out)
    assert first["reused"] is False and first["targets"] == 2 and len(first["job_id"]) == 32
    code, out, _ = run(["batch", "submit", "-"], capsys, stdin=text, monkeypatch=monkeypatch)
    again = json.loads(out)
    assert again == {**first, "reused": True, "note": again["note"]}
    assert "sift batch submit --fresh" in again["note"]
    assert f"sift batch retry {first['job_id']}" in again["note"]
    assert "/v1/" not in again["note"] and "{id}" not in again["note"]  # no route for people
    code, out, _ = run(["batch", "status", first["job_id"]], capsys)
    body = json.loads(out)
    assert code == 0 and body["job_id"] == first["job_id"] and body["status"] == "queued"
    assert [t["status"] for t in body["targets"]] == ["pending", "pending"]
    code, out, _ = run(["batch", "cancel", first["job_id"]], capsys)
    assert code == 0 and json.loads(out) == {"success": True, "status": "cancelled"}
    code, out, _ = run(["batch", "status", first["job_id"], "--wait"], capsys)
    assert code == 5 and json.loads(out)["status"] == "cancelled"


def test_fetch_prints_the_content_and_sends_each_option(env, site, capsys):
    code, out, _ = run(["fetch", site.url("/article/3?cli")], capsys)
    assert code == 0 and out.startswith("# Harbour breakwater to be rebuilt (3)")
    code, out, _ = run(["fetch", site.url("/plain.txt?cli"), "--grep", "needle", "--json"], capsys)
    assert json.loads(out)["matches"] == 10
    code, out, _ = run(["fetch", site.url("/data.json?cli"), "--jq", ".items[].id"], capsys)
    assert out.split() == ["1", "2"]
    argv = ["fetch", site.url("/article/4?cli"), "--question", "What will it cost?", "--json"]
    answer = json.loads(run([*argv, "--no-context"], capsys)[1])
    assert answer["answer_by"] == "passages" and "context" not in answer
    assert json.loads(run([*argv, "--context"], capsys)[1])["context"]
    body = json.loads(
        run(["fetch", site.url("/article/5?cli"), "--mode", "links", "--json"], capsys)[1]
    )
    assert body["mode"] == "links" and site.url("/about") in body["content"]


def test_a_truncated_fetch_says_how_to_narrow_on_stderr(env, site, capsys):
    code, out, err = run(["fetch", site.url("/big?words=2000"), "--mode", "text"], capsys)
    assert code == 0 and len(out) <= 401
    assert "truncated" in one_line(err) and "--grep" in err


# -- help and version -------------------------------------------------------------------------


def _verbs(parser, prefix=()):
    """(argv prefix, parser) of every leaf verb."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _verbs(sub, (*prefix, name))


def test_every_verbs_help_describes_each_flag_and_gives_its_environment_and_an_example():
    verbs = dict(_verbs(build_parser()))
    assert len(verbs) == 15
    for argv, parser in verbs.items():
        for action in parser._actions:
            assert action.help, f"sift {' '.join(argv)}: {action.dest} has no help"
        text = parser.format_help()
        env = "SIFT_URL" if argv[0] in ("fetch", "batch", "mcp") else "SIFT_CONFIG"
        assert env in text and "\nexample:\n  " in text, argv
        assert f"sift {' '.join(argv)}" in text.split("\nexample:\n", 1)[1], argv
        if argv[0] in ("fetch", "batch", "mcp"):
            assert "SIFT_KEY" in text


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"sift {version(about.DISTRIBUTION)}"


def test_a_fetch_with_accept_verdict_prints_the_verdict_on_stderr(env, site, capsys):
    # docs/API.md §POST /v1/fetch: a page returned anyway says what it is.
    argv = ["fetch", site.url("/app?cli"), "--accept-verdict", "bot_wall"]
    code, _, err = run(argv, capsys)
    assert code == 0 and one_line(err) == "sift: verdict bot_wall"


def test_a_grep_without_a_match_says_so_on_stderr(env, site, capsys):
    code, out, err = run(["fetch", site.url("/plain.txt?cli"), "--grep", "zzz-not-there"], capsys)
    assert code == 0 and out == ""
    assert one_line(err) == "sift: grep: no line matches the pattern; the content is empty"


def test_submit_sends_a_fresh_list_as_a_new_job(env, site, capsys, monkeypatch):
    text = site.url("/article/6?fresh")
    code, out, _ = run(["batch", "submit", "-"], capsys, stdin=text, monkeypatch=monkeypatch)
    first = json.loads(out)
    client.cancel(first["job_id"])
    argv = ["batch", "submit", "-", "--fresh"]
    code, out, _ = run(argv, capsys, stdin=text, monkeypatch=monkeypatch)
    again = json.loads(out)
    assert code == 0 and again["reused"] is False and again["job_id"] != first["job_id"]
    client.cancel(again["job_id"])
