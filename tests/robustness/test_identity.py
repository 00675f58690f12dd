"""One caller is `(name, workspace, class)` everywhere (docs/SECURITY.md §Limits and
isolation): a name is one caller in the keys file, and each restricted caller's fetches are
its own in the caches."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sift import batch
from sift import config as configmod
from sift.auth import Caller, KeyRing, KeysError, add_key
from sift.errors import TooManyRequests
from sift.store import open_store


@pytest.fixture
def pair(fresh):
    procs = fresh(start=False)
    keys = procs.state_dir / "keys.toml"
    for name in ("spy2",):
        procs.keys[name] = add_key(keys, name, restricted=True)
    return procs.start()


@pytest.mark.e2e
def test_a_restricted_caller_never_sees_another_restricted_callers_cached_fetch(pair, site, tag):
    url = site.url(f"/article/3?t={tag}")
    status, first = pair.call("POST", "/v1/fetch", {"url": url}, who="spy")
    assert status == 200 and first["cached"] is False, first
    status, second = pair.call("POST", "/v1/fetch", {"url": url}, who="spy2")
    assert status == 200 and second["cached"] is False, second
    status, again = pair.call("POST", "/v1/fetch", {"url": url}, who="spy")
    assert again["cached"] is True and again["fetched_at"] == first["fetched_at"]


@pytest.mark.e2e
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


# -- jobs: the whole identity, on a real database file -----------------------------------------

ALICE = Caller("alice")
ALICE_ELSEWHERE = Caller("alice", "other")
ALICE_RESTRICTED = Caller("alice", cls="restricted")
T0 = 1_700_000_000.0


@pytest.fixture
def store(state_dir):
    cfg = configmod.from_dict({"store": {"state_dir": str(state_dir)}, "batch": {}})
    s = open_store(cfg)
    yield cfg, s
    s.close()


async def submit_as(cfg, store, caller, names):
    targets = [{"url": f"http://127.0.0.1:9/{n}"} for n in names]
    return await batch.submit(store, cfg.batch, caller, targets, now=T0)


@pytest.mark.parametrize("other", [ALICE_ELSEWHERE, ALICE_RESTRICTED], ids=["workspace", "class"])
async def test_a_job_is_neither_read_nor_cancelled_by_the_same_name_in_another_identity(
    store, other
):
    cfg, s = store
    job = await submit_as(cfg, s, ALICE, ["a"])
    assert await batch.read_status(s, job.job_id, other) is None
    outcome = await batch.cancel(s, job.job_id, other, now=T0)
    assert outcome.prior is None and not outcome.cancelled
    view = await batch.read_status(s, job.job_id, ALICE)
    assert view is not None and view.job.status == "queued"


@pytest.mark.parametrize("other", [ALICE_ELSEWHERE, ALICE_RESTRICTED], ids=["workspace", "class"])
async def test_the_same_list_from_the_same_name_in_another_identity_is_a_new_job(store, other):
    cfg, s = store
    first = await submit_as(cfg, s, ALICE, ["a", "b"])
    second = await submit_as(cfg, s, other, ["a", "b"])
    assert not second.reused and second.job_id != first.job_id


async def test_the_live_job_cap_counts_per_identity(store):
    cfg, s = store  # one live job per caller (the default)
    await submit_as(cfg, s, ALICE, ["a"])
    with pytest.raises(TooManyRequests):
        await submit_as(cfg, s, ALICE, ["b"])
    assert not (await submit_as(cfg, s, ALICE_ELSEWHERE, ["b"])).reused
