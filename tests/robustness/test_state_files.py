"""The state dir is the service user's alone: 0700, its files 0600, whatever the umask of the
shell that started the processes (docs/SECURITY.md §Limits and isolation)."""

from __future__ import annotations

import fcntl
import os
import stat

import pytest

from tests.e2e.procs import wait_for_job_status

pytestmark = pytest.mark.e2e

FILES = ("sift.db", "sift.db-wal", "sift.db-shm", "worker.lock", "keys.toml")


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def used_pair(fresh, site, tag):
    """A pair started from a 022 umask on a 0755 state dir, after a fetch and a batch."""
    procs = fresh(start=False)
    os.chmod(procs.state_dir, 0o755)
    os.chmod(procs.state_dir / "keys.toml", 0o644)
    old = os.umask(0o022)
    try:
        procs.start()
    finally:
        os.umask(old)
    status, job = procs.submit([site.url(f"/article/1?t={tag}")])
    assert status == 202, job
    wait_for_job_status(procs, job["job_id"])
    return procs


def test_the_state_dir_is_0700_and_its_files_0600(used_pair):
    state = used_pair.state_dir
    assert mode(state) == 0o700
    for name in FILES:
        assert mode(state / name) == 0o600, name
    for path in (state / "gates").rglob("*"):
        assert mode(path) & 0o077 == 0, path


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a probe as another user")
def test_another_local_user_can_neither_read_the_database_nor_hold_the_worker_lock(used_pair):
    answers = as_nobody(used_pair.state_dir, ["sift.db", "worker.lock"])
    assert answers == ["refused sift.db", "refused worker.lock"], answers


def as_nobody(state_dir, names: list[str]) -> list[str]:
    """Try to open (and lock) each file as user 65534, in a forked child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, report, exit without running pytest's teardown
        out = []
        try:
            os.setgid(65534)
            os.setuid(65534)
            for name in names:
                try:
                    with open(state_dir / name, "rb") as f:
                        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    out.append(f"opened {name}")
                except OSError:
                    out.append(f"refused {name}")
        finally:
            os.write(w, "\n".join(out).encode())
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read().decode()
    os.waitpid(pid, 0)
    return data.split("\n")
