"""`sift mcp` as a verb (docs/MCP.md §Install and run): its help, and a setup problem stops it
with one line and exit status 2 before it speaks any protocol."""

from __future__ import annotations

import pytest

from sift.cli.main import main


def test_mcp_help_names_its_environment_and_an_example(capsys):
    with pytest.raises(SystemExit) as e:
        main(["mcp", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert "SIFT_URL" in out and "SIFT_KEY" in out and "\nexample:\n  " in out
    assert "sift mcp" in out.split("\nexample:\n", 1)[1]


def test_a_bad_sift_url_stops_it_with_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("SIFT_KEY", "sk-sift-x")
    monkeypatch.setenv("SIFT_URL", "ftp://127.0.0.1")
    assert main(["mcp"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("sift: SIFT_URL 'ftp://127.0.0.1' is not an http(s) URL")


def test_print_config_without_a_key_prints_a_placeholder_and_says_so(monkeypatch, capsys):
    monkeypatch.delenv("SIFT_KEY", raising=False)
    monkeypatch.setenv("SIFT_URL", "http://127.0.0.1:9/")
    assert main(["mcp", "--print-config", "toml"]) == 0
    out, err = capsys.readouterr()
    assert 'SIFT_URL = "http://127.0.0.1:9"' in out and 'SIFT_KEY = "sk-sift-…"' in out
    assert out.startswith('[mcp_servers.sift]\ncommand = "/')
    assert err.startswith("sift: SIFT_KEY is not set")


def test_print_config_with_a_bad_url_exits_2(monkeypatch, capsys):
    monkeypatch.setenv("SIFT_KEY", "sk-sift-x")
    monkeypatch.setenv("SIFT_URL", "ftp://127.0.0.1")
    assert main(["mcp", "--print-config"]) == 2
    assert capsys.readouterr().out == ""
