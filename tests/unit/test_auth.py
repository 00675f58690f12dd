"""API keys: hashed at rest, 0600 file, Bearer lookup by hash, clear errors."""

from __future__ import annotations

import stat
import subprocess
import sys

import pytest

from sift.auth import Caller, KeyRing, KeysError, add_key, hash_key


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
