"""API keys: hashed at rest, 0600 file, Bearer lookup by hash, clear errors."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sift.auth import Caller, KeyRing, KeysError, KeysFile, add_key, hash_key, revoke_key


def test_add_key_stores_only_the_hash_in_a_0600_file(tmp_path):
    path = tmp_path / "keys.toml"
    key = add_key(path, "agent-1", workspace="ops")
    text = path.read_text()
    assert key not in text
    assert hash_key(key) in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_lookup_by_bearer_key_returns_the_caller(tmp_path):
    path = tmp_path / "keys.toml"
    fleet = add_key(path, "a")
    restricted = add_key(path, "b", workspace="w2", restricted=True)
    ring = KeyRing.load(path)
    assert ring.lookup(fleet) == Caller("a", "default", "fleet")
    assert ring.lookup(restricted) == Caller("b", "w2", "restricted")
    assert ring.lookup("sk-sift-unknown") is None
    assert len(ring) == 2


def test_missing_keys_file_is_an_empty_ring(tmp_path):
    assert len(KeyRing.load(tmp_path / "none.toml")) == 0


@pytest.mark.parametrize(
    "text",
    [
        "[[keys]\n",
        '[[keys]]\nname = "a"\nclass = "admin"\nsha256 = "' + "0" * 64 + '"\n',
        '[[keys]]\nname = "a"\nclass = "fleet"\nsha256 = "xyz"\n',
        '[[keys]]\nname = "a b"\nclass = "fleet"\nsha256 = "' + "0" * 64 + '"\n',
        '[[keys]]\nname = "a"\nclass = "fleet"\nsha256 = "' + "0" * 64 + '"\nkey = "plain"\n',
        "other = 1\n",
    ],
)
def test_a_bad_keys_file_is_a_clear_error(tmp_path, text):
    path = tmp_path / "keys.toml"
    path.write_text(text)
    with pytest.raises(KeysError, match="keys file"):
        KeyRing.load(path)


def test_sift_keys_add_prints_the_key_alone_on_the_last_line(tmp_path):
    cfg = tmp_path / "sift.toml"
    cfg.write_text('[store]\nstate_dir = "st"\n')
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sift",
            "keys",
            "add",
            "bot",
            "--workspace",
            "w",
            "--restricted",
            "--config",
            str(cfg),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    key = out.rstrip("\n").splitlines()[-1]
    assert key.startswith("sk-sift-") and " " not in key
    assert KeyRing.load(tmp_path / "st" / "keys.toml").lookup(key) == Caller(
        "bot", "w", "restricted"
    )


# -- list, revoke, and a keys file that changes under the API ---------------------------------


def test_a_name_already_in_the_file_is_refused(tmp_path):
    path = tmp_path / "keys.toml"
    add_key(path, "agent")
    with pytest.raises(KeysError, match="a key named 'agent' exists; revoke it first"):
        add_key(path, "agent")


def test_list_shows_name_class_workspace_and_creation_never_the_key(tmp_path):
    path = tmp_path / "keys.toml"
    key = add_key(path, "a", workspace="ops", now=1_700_000_000)
    entries = [e.as_dict() for e in KeyRing.load(path).entries]
    assert entries == [
        {"name": "a", "workspace": "ops", "class": "fleet", "created": "2023-11-14T22:13:20Z"}
    ]
    assert key not in str(entries) and hash_key(key) not in str(entries)


def test_revoke_removes_the_names_key_and_keeps_the_others_in_a_0600_file(tmp_path):
    path = tmp_path / "keys.toml"
    keep, gone = add_key(path, "keep"), add_key(path, "gone")
    assert revoke_key(path, "gone") == 1
    ring = KeyRing.load(path)
    assert ring.lookup(gone) is None and ring.lookup(keep) == Caller("keep")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)  # an operator let the service user read it
    add_key(path, "third")
    revoke_key(path, "third")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    with pytest.raises(KeysError, match="no key named 'gone'"):
        revoke_key(path, "gone")


def test_the_api_view_reloads_the_file_when_it_changes(tmp_path):
    path = tmp_path / "keys.toml"
    first = add_key(path, "first")
    keys = KeysFile(path)
    assert keys.lookup(first) == Caller("first")
    second = add_key(path, "second")
    assert keys.lookup(second) == Caller("second")
    revoke_key(path, "first")
    assert keys.lookup(first) is None and keys.lookup(second) == Caller("second")
    path.unlink()
    assert keys.lookup(second) is None  # no file: no key, as at start


def test_a_broken_keys_file_keeps_the_last_good_keys_and_logs_why_once(tmp_path, caplog):
    path = tmp_path / "keys.toml"
    key = add_key(path, "agent")
    keys = KeysFile(path)
    path.write_text("[[keys]\nbroken = ", encoding="utf-8")
    with caplog.at_level("WARNING", logger="sift.auth"):
        assert keys.lookup(key) == Caller("agent")
        assert keys.lookup(key) == Caller("agent")
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert warnings[0].getMessage() == "keys file not reloaded; the last good keys stay in force"
    assert "not valid TOML" in warnings[0].fields["error"]


def test_keys_add_without_a_config_uses_the_same_file_as_serve_and_prints_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SIFT_CONFIG"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-m", "sift", "keys", "add", "bot"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=env,
    )
    served = tmp_path / "var" / "keys.toml"  # what `sift serve` reads here without a config
    assert f"sift: keys file {served} (config: the built-in defaults)" in out.stderr
    assert KeyRing.load(served).lookup(out.stdout.splitlines()[-1]) == Caller("bot")
