"""One caller is `(name, workspace, class)` everywhere (docs/SECURITY.md §Limits and
isolation): a name is one caller in the keys file, and each restricted caller's fetches are
its own in the caches."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sift.auth import KeyRing, KeysError, add_key

pytestmark = pytest.mark.e2e


@pytest.fixture
def pair(fresh):
    procs = fresh(start=False)
    keys = procs.state_dir / "keys.toml"
    for name in ("spy2",):
        procs.keys[name] = add_key(keys, name, restricted=True)
    return procs.start()


def test_a_restricted_caller_never_sees_another_restricted_callers_cached_fetch(pair, site, tag):
    url = site.url(f"/article/3?t={tag}")
    status, first = pair.call("POST", "/v1/fetch", {"url": url}, who="spy")
    assert status == 200 and first["cached"] is False, first
    status, second = pair.call("POST", "/v1/fetch", {"url": url}, who="spy2")
    assert status == 200 and second["cached"] is False, second
    status, again = pair.call("POST", "/v1/fetch", {"url": url}, who="spy")
    assert again["cached"] is True and again["fetched_at"] == first["fetched_at"]


def test_fleet_callers_share_the_cache(pair, site, tag):
    url = site.url(f"/article/4?t={tag}")
    status, first = pair.call("POST", "/v1/fetch", {"url": url}, who="alice")
    assert status == 200 and first["cached"] is False, first
    status, second = pair.call("POST", "/v1/fetch", {"url": url}, who="bob")
    assert second["cached"] is True and second["fetched_at"] == first["fetched_at"]


def keys_add(config, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sift", "keys", "add", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def config(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "sift.toml"
    path.write_text(f'[store]\nstate_dir = "{state}"\n')
    return path


@pytest.mark.parametrize(
    "again",
    [["alice", "--workspace", "other"], ["alice", "--restricted"], ["alice"]],
    ids=["other-workspace", "other-class", "same-caller"],
)
def test_sift_keys_add_refuses_a_name_that_already_has_a_key(config, again):
    assert keys_add(config, "alice").returncode == 0
    done = keys_add(config, *again)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "one name is one caller" in done.stderr or "--rotate" in done.stderr
    assert done.stdout == ""
    assert len(KeyRing.load(config.parent / "state" / "keys.toml")) == 1


def test_rotate_adds_a_second_key_for_the_same_caller_only(config):
    assert keys_add(config, "alice").returncode == 0
    assert keys_add(config, "alice", "--rotate").returncode == 0
    assert keys_add(config, "alice", "--rotate", "--restricted").returncode == 2
    assert len(KeyRing.load(config.parent / "state" / "keys.toml")) == 2


def test_a_keys_file_giving_one_name_two_identities_is_refused_at_start(tmp_path):
    keys = tmp_path / "keys.toml"
    add_key(keys, "alice")
    digest = "0" * 64
    keys.write_text(
        keys.read_text()
        + f'\n[[keys]]\nname = "alice"\nworkspace = "other"\nclass = "fleet"\nsha256 = "{digest}"\n'
    )
    with pytest.raises(KeysError, match="one name is one caller"):
        KeyRing.load(keys)
