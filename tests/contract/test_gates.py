"""The gates' rules on both slot tables: lock files (one box) and PostgreSQL advisory locks
(several boxes on one database; docs/GATES.md §Across boxes). Two `Gates` objects stand for two
processes (with Postgres: two boxes, each with its own session); the kill test uses a real
child process."""

from __future__ import annotations

import hashlib
import itertools
import os
import signal
import subprocess
import sys
import time

import pytest

from sift.errors import Busy, GatesFull, GatesUnreachable
from sift.gates import PG_HOST_BUCKETS, Gates, slots
from sift.gates.pg_slots import PgSlotTable

LIMITS = dict(global_=4, per_host=2, per_caller=4, host_buckets=4096)

CHILD = """
import sys, time
from pathlib import Path
from sift.gates import PG_HOST_BUCKETS, Gates
from sift.gates.pg_slots import PgSlotTable
dsn = sys.argv[2]
table = PgSlotTable(dsn) if dsn else None
buckets = PG_HOST_BUCKETS if dsn else 4096
gates = Gates(Path(sys.argv[1]), global_=4, per_host=2, per_caller=4, host_buckets=buckets,
              table=table)
permits = [gates.acquire("c", h) for h in sys.argv[3:]]
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture(params=["files", "postgres"])
def box(request, state_dir):
    """A factory of `Gates` as separate processes (boxes) would hold them."""
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else ""
    made = []

    def make(**limits) -> Gates:
        table = PgSlotTable(dsn) if dsn else None
        buckets = {"host_buckets": PG_HOST_BUCKETS} if dsn else {}  # as `Gates.from_config`
        g = Gates(state_dir / "gates", **{**LIMITS, **buckets, **limits}, table=table)
        made.append(g)
        return g

    make.dsn = dsn
    make.state_dir = state_dir
    yield make
    for g in made:
        g.close()


def test_the_per_host_limit_holds_across_boxes(box):
    a, b = box(), box()
    held = [a.acquire("c1", "h.example"), b.acquire("c2", "h.example")]
    with pytest.raises(Busy) as info:
        b.acquire("c3", "H.example")
    assert "per-host limit" in str(info.value)
    assert len(held) == 2


def test_hosts_chosen_to_collide_under_the_public_hash_each_get_their_own_slot(box):
    def public(host: str) -> int:  # the slot hash before it was keyed
        return int.from_bytes(hashlib.blake2b(host.encode(), digest_size=8).digest()) % 64

    victim = "en.wikipedia.org"
    chosen = [
        n for n in (f"x{i}.attacker.example" for i in range(5000)) if public(n) == public(victim)
    ]
    if not box.dsn:  # lock files: a fixed deployment key, so the answer is exact
        (box.state_dir / "gates").mkdir(mode=0o700)
        key = box.state_dir / "gates" / slots.SECRET_FILE
        key.write_bytes(bytes(range(32)))
        key.chmod(0o600)
    a, b = box(global_=64, per_host=1, per_caller=64), box(global_=64, per_host=1, per_caller=64)
    held = [a.acquire("attacker", n) for n in chosen[:8]]
    held.append(b.acquire("someone", victim))
    for p in held:
        p.release()


def test_the_global_limit_holds_across_boxes(box):
    a, b = box(), box()
    held = [a.acquire("c", f"h{i}.example") for i in range(2)]
    held += [b.acquire("d", f"x{i}.example") for i in range(2)]
    with pytest.raises(Busy) as info:
        a.acquire("e", "y.example")
    assert "global limit" in str(info.value)
    held[2].release()
    a.acquire("e", "y.example").release()


def test_two_fetches_of_one_process_never_share_a_slot(box):
    a = box(per_host=1)
    first = a.acquire("c", "h.example")
    with pytest.raises(Busy):
        a.acquire("c", "h.example")
    first.release()


def test_a_release_frees_the_slot_for_another_box_and_releasing_twice_is_harmless(box):
    a, b = box(per_host=1), box(per_host=1)
    permit = a.acquire("c", "h.example")
    with pytest.raises(Busy):
        b.acquire("c", "h.example")
    permit.release()
    other = b.acquire("c", "h.example")
    permit.release()
    with pytest.raises(Busy):
        a.acquire("c", "h.example")
    other.release()


def test_every_slot_a_box_released_is_free_for_another_box(box):
    a, b = box(), box()
    mine = [a.acquire("c", "h.example") for _ in range(2)]
    for permit in mine:
        permit.release()
    theirs = [b.acquire("d", "h.example") for _ in range(2)]
    assert not any(p.released for p in theirs)


def test_batch_work_leaves_the_last_slot_to_interactive_fetches_across_boxes(box):
    a, b = box(), box()
    batch = a.acquire("c", "h.example", background=True)
    with pytest.raises(Busy):
        b.acquire("d", "h.example", background=True)
    interactive = b.acquire("d", "h.example")  # takes the last slot
    assert not (batch.released or interactive.released)


def test_a_killed_holder_frees_its_slots(box, state_dir):
    argv = [sys.executable, "-c", CHILD, str(state_dir / "gates"), box.dsn]
    argv += ["h.example", "h.example"]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        a = box()
        with pytest.raises(Busy):
            a.acquire("x", "h.example")
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        for _ in range(200):  # the server notices the closed session within milliseconds
            try:
                a.acquire("x", "h.example")
                break
            except Busy:
                time.sleep(0.01)
        else:
            pytest.fail("the killed holder's slots never came back")
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()


def test_gates_whose_database_is_unreachable_answer_503_not_full(state_dir):
    """docs/GATES.md §Across boxes: no slot can be taken, and the caller is told why."""
    dsn = f"host={state_dir} dbname=none connect_timeout=1"  # a socket directory with no server
    gates = Gates(state_dir / "gates", **LIMITS, table=PgSlotTable(dsn))
    with pytest.raises(GatesUnreachable) as caught:
        gates.acquire("c", "example.org")
    assert caught.value.status == 503 and isinstance(caught.value, GatesFull)
    assert "database cannot be reached" in str(caught.value)
    assert gates.room("c", "example.org") is False


def test_a_refused_batch_acquire_holds_no_slot_of_any_group(box):
    """docs/GATES.md §Acquire: all or nothing, the reserve's refusal included."""
    a, b = box(global_=2), box(global_=2)
    other = a.acquire("x", "other.example")
    with pytest.raises(GatesFull) as info:  # the global reserve refuses after caller and host
        b.acquire("c", "h.example", background=True)
    assert "global limit nearly full" in str(info.value)
    other.release()
    both = [a.acquire("c", "h.example"), a.acquire("c", "h.example")]  # b gave both back
    assert b.in_use() == {"global": 0, "host": 0, "caller": 0}
    assert not any(p.released for p in both)
    for permit in both:
        permit.release()


def test_batch_work_counts_its_own_process_slots_toward_the_reserve(box):
    a = box(per_host=3)
    mine = [a.acquire("c", "h.example"), a.acquire("c", "h.example", background=True)]
    with pytest.raises(GatesFull):  # slots 0 and 1 are ours, 2 is the last: left free
        a.acquire("c", "h.example", background=True)
    assert a.in_use()["host"] == 2 and not any(p.released for p in mine)
    for permit in mine:
        permit.release()


def test_a_batch_acquire_and_its_release_are_two_round_trips_on_postgres(pg_dsn, state_dir):
    """docs/GATES.md §Across boxes: one statement takes the three groups, one gives them back
    (a take and a probe per group made it 7 and 3)."""
    gates = Gates(
        state_dir / "gates",
        **{**LIMITS, "host_buckets": PG_HOST_BUCKETS},
        table=PgSlotTable(pg_dsn),
    )
    gates.acquire("c", "warm.example").release()  # the session and the secret, once
    trace = state_dir / "libpq.trace"
    with open(trace, "w") as f:
        conn = gates._table._session()
        conn.pgconn.trace(f.fileno())
        try:
            permit = gates.acquire("c", "h.example", background=True)
            assert gates.in_use() == {"global": 1, "host": 1, "caller": 1}
            permit.release()
        finally:
            conn.pgconn.untrace()
    sides = [line.split("\t")[1] for line in trace.read_text().splitlines()]
    assert sum(1 for pair in itertools.pairwise(sides) if pair == ("F", "B")) == 2
    assert gates.in_use() == {"global": 0, "host": 0, "caller": 0}
    gates.close()
