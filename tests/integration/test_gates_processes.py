"""Gates across real processes: shared limits, and a killed holder's slots come back.

The child is a fresh interpreter (`subprocess`, not fork), as the API and the worker are: it
opens the same gates directory, takes permits, prints "ready", and waits to be killed.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys

import pytest

from sift.errors import Busy
from sift.gates import Gates, slots

LIMITS = dict(global_=8, per_host=2, per_caller=4, host_buckets=4096)

CHILD = """
import sys, time
from pathlib import Path
from sift.gates import Gates
gates = Gates(Path(sys.argv[1]), global_=8, per_host=2, per_caller=4, host_buckets=4096)
permits = [gates.acquire(caller, host) for caller, host in zip(sys.argv[2::2], sys.argv[3::2])]
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture(autouse=True)
def fixed_key(state_dir):
    """A fixed slot-hash key, under which the hosts these tests name share no bucket, so
    each test sees only the limit it is about (docs/GATES.md §Keyed buckets)."""
    (state_dir / "gates").mkdir(mode=0o700)
    key = state_dir / "gates" / slots.SECRET_FILE
    key.write_bytes(bytes(range(32)))
    key.chmod(0o600)


@pytest.fixture
def holder(state_dir):
    """Start a child that holds permits for (caller, host) pairs; kill it by PID at the end."""
    procs = []

    def start(*pairs):
        argv = [sys.executable, "-c", CHILD, str(state_dir / "gates")]
        argv += [x for pair in pairs for x in pair]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


def test_two_processes_share_the_per_host_limit(state_dir, holder):
    holder(("c1", "h.example"), ("c2", "h.example"))
    gates = Gates(state_dir / "gates", **LIMITS)
    with pytest.raises(Busy) as info:
        gates.acquire("c3", "H.example")
    assert info.value.msg.startswith("per-host limit reached")


def test_two_processes_share_the_global_limit(state_dir, holder):
    holder(*[(f"c{i}", f"h{i}.example") for i in range(6)])
    gates = Gates(state_dir / "gates", **dict(LIMITS, per_host=8, per_caller=8))
    permits = [gates.acquire("p", f"x{i}.example") for i in range(2)]
    with pytest.raises(Busy) as info:
        gates.acquire("p", "x2.example")
    assert info.value.msg.startswith("global limit reached")
    for p in permits:
        p.release()


def test_sigkilled_holder_frees_its_slots(state_dir, holder):
    child = holder(*[(f"c{i}", f"h{i}.example") for i in range(4)], *[("c9", "h9.example")] * 2)
    gates = Gates(state_dir / "gates", **LIMITS)
    with pytest.raises(Busy):
        gates.acquire("c9", "h9.example")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    # Every slot the child held is free again: all of global, the full host and caller groups.
    permits = [gates.acquire("c9", "h9.example") for _ in range(2)]
    permits += [gates.acquire(f"c{i}", f"h{i}.example") for i in range(4)]
    permits += [gates.acquire("c9", f"y{i}.example") for i in range(2)]
    assert gates.in_use()["global"] == 8
    for p in permits:
        p.release()


def _release_inherited(permit, done):
    permit.release()
    done.put(True)


def test_forked_child_cannot_release_the_parents_slot(state_dir):
    # A forked child shares the parent's open file descriptions; unlocking one there would
    # free the parent's slot under its feet.
    gates = Gates(state_dir / "gates", **dict(LIMITS, global_=1))
    permit = gates.acquire("c", "h.example")
    ctx = multiprocessing.get_context("fork")
    done = ctx.Queue()
    child = ctx.Process(target=_release_inherited, args=(permit, done))
    child.start()
    assert done.get(timeout=10)
    child.join(10)
    other = Gates(state_dir / "gates", **dict(LIMITS, global_=1))
    with pytest.raises(Busy):
        other.acquire("c", "h.example")
    permit.release()
    other.acquire("c", "h.example").release()
