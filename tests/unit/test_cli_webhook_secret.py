"""`sift keys webhook-secret NAME` creates or rotates a caller's webhook secret and shows it
once, on the last line; the file keeps the keys file's protection (docs/SECURITY.md §Auth)."""

from __future__ import annotations

import tomli_w

from sift.auth import Caller, add_key
from sift.cli.main import main
from sift.signing import WebhookSecrets, secrets_path


def _config(tmp_path):
    path = tmp_path / "sift.toml"
    state = tmp_path / "state"
    state.mkdir()
    path.write_text(tomli_w.dumps({"store": {"state_dir": str(state)}}))
    return path, state / "keys.toml"


def test_webhook_secret_shows_a_new_secret_once_and_rotation_replaces_it(tmp_path, capsys):
    cfg, keys = _config(tmp_path)
    add_key(keys, "alice", workspace="w1")
    assert main(["keys", "webhook-secret", "alice", "--config", str(cfg)]) == 0
    first = capsys.readouterr().out.splitlines()[-1]
    assert first.startswith("whsec_")
    assert main(["keys", "webhook-secret", "alice", "--config", str(cfg)]) == 0
    second = capsys.readouterr().out.splitlines()[-1]
    assert second != first
    path = secrets_path(keys)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text().count("whsec_") == 1  # rotated, not added
    assert WebhookSecrets(keys).of(Caller("alice", "w1")) == second
    assert WebhookSecrets(keys).of(Caller("alice")) is None  # another identity


def test_webhook_secret_for_an_unknown_name_is_an_error(tmp_path, capsys):
    cfg, _ = _config(tmp_path)
    assert main(["keys", "webhook-secret", "nobody", "--config", str(cfg)]) != 0
    assert "no key named 'nobody'" in capsys.readouterr().err
