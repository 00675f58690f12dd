"""Start-up against a state dir that cannot be used: both processes say why on one line of
stderr and exit non-zero, before they serve or drain anything (docs/WORKER.md §Shutdown and
supervision, docs/OPERATIONS.md §Running it)."""

from __future__ import annotations

import pytest

from sift.auth import add_key
from tests.e2e.procs import free_port
from tests.robustness.helpers import (
    ROLES,
    readonly_mount_unavailable,
    readonly_wrapper,
    start_and_wait,
    write_config,
)

pytestmark = pytest.mark.e2e


def one_line_error(done, state_dir) -> str:
    assert done.returncode not in (0, None), (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert str(state_dir) in lines[0] and "Traceback" not in lines[0]
    assert done.stdout == ""
    return lines[0]


@pytest.mark.parametrize("command", ROLES)
def test_a_state_dir_that_cannot_be_created_is_a_one_line_error_and_a_non_zero_exit(
    tmp_path, command
):
    (tmp_path / "file").write_text("in the way\n")
    state_dir = tmp_path / "file" / "state"  # a regular file where its parent should be
    config = write_config(tmp_path / "sift.toml", state_dir, free_port())
    line = one_line_error(start_and_wait(command, config), state_dir)
    assert "does not exist" in line


@pytest.mark.parametrize("command", ROLES)
def test_a_state_dir_that_is_a_regular_file_is_a_one_line_error_and_a_non_zero_exit(
    tmp_path, command
):
    state_dir = tmp_path / "state"
    state_dir.write_text("not a folder\n")
    config = write_config(tmp_path / "sift.toml", state_dir, free_port())
    line = one_line_error(start_and_wait(command, config), state_dir)
    assert "not a directory" in line
    assert state_dir.read_text() == "not a folder\n"


@pytest.mark.parametrize("command", ROLES)
def test_a_read_only_state_dir_is_a_one_line_error_and_a_non_zero_exit(tmp_path, command):
    """A real read-only mount (root ignores mode bits, so chmod would prove nothing)."""
    why = readonly_mount_unavailable(tmp_path / "probe")
    if why:
        pytest.skip(f"no read-only mount here: {why}")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    add_key(state_dir / "keys.toml", "alice")  # otherwise a valid state dir
    before = sorted(p.name for p in state_dir.iterdir())  # keys.toml and its edit lock
    config = write_config(tmp_path / "sift.toml", state_dir, free_port())
    done = start_and_wait(command, config, wrap=readonly_wrapper(state_dir))
    line = one_line_error(done, state_dir)
    assert "not writable" in line
    assert sorted(p.name for p in state_dir.iterdir()) == before  # the start wrote nothing
