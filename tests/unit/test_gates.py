"""Gates in one process: each limit, all-or-nothing, release, the bounded file count.

Each test loosens the limits it is not about, so the Busy it expects can only come from its
own rule (and checks which limit said so).
"""

from __future__ import annotations

import hashlib
import os
import stat

import pytest

from sift.config import GatesConfig
from sift.errors import Busy
from sift.gates import CALLER_BUCKETS, Gates, bucket, handed_over, slots


def make(state_dir, **limits):
    conf = dict(global_=8, per_host=2, per_caller=4, host_buckets=64)
    conf.update(limits)
    return Gates(state_dir / "gates", **conf)


def distinct(gates, prefix, count, buckets):
    """Names that land in different buckets of `gates`, so no two share a limit by hashing."""
    found, seen = [], set()
    i = 0
    while len(found) < count:
        name = f"{prefix}{i}"
        b = bucket(name, buckets, gates._table.secret())
        if b not in seen:
            seen.add(b)
            found.append(name)
        i += 1
    return found


def slot_files(state_dir):
    return [f for f in (state_dir / "gates").iterdir() if f.name != slots.SECRET_FILE]


def busy_limit(gates, caller, host):
    with pytest.raises(Busy) as info:
        gates.acquire(caller, host)
    assert info.value.status == 429 and info.value.hint == "retry"
    msg = info.value.msg
    kind = next(k for k in ("per-caller", "per-host", "global", "caller", "host") if k in msg)
    return kind.removeprefix("per-")


def test_global_limit_of_8_ninth_acquire_is_busy(state_dir):
    gates = make(state_dir, per_host=16, per_caller=16)
    permits = [gates.acquire(f"c{i}", f"h{i}.example") for i in range(8)]
    assert busy_limit(gates, "c9", "h9.example") == "global"
    assert gates.in_use()["global"] == 8
    for p in permits:
        p.release()


def test_per_host_limit_2_third_to_same_host_is_busy_another_host_is_not(state_dir):
    gates = make(state_dir, per_caller=16)
    h, other = distinct(gates, "h", 2, 64)
    permits = [gates.acquire("c", h), gates.acquire("c", h)]
    assert busy_limit(gates, "c", h) == "host"
    permits.append(gates.acquire("c", other))
    for p in permits:
        p.release()


def test_host_is_matched_case_insensitively_and_without_trailing_dot(state_dir):
    gates = make(state_dir, per_caller=16)
    permits = [gates.acquire("c", "Example.COM"), gates.acquire("c", "example.com.")]
    assert busy_limit(gates, "c", "example.com") == "host"
    for p in permits:
        p.release()


def test_per_caller_limit_fifth_acquire_by_same_caller_is_busy_another_caller_is_not(state_dir):
    gates = make(state_dir, per_host=16)
    permits = [gates.acquire("alice", f"h{i}.example") for i in range(4)]
    assert busy_limit(gates, "alice", "h4.example") == "caller"
    key = gates._table.secret()
    other = next(
        c
        for c in ("bob", "carol", "dave")
        if bucket(c, CALLER_BUCKETS, key) != bucket("alice", CALLER_BUCKETS, key)
    )
    permits.append(gates.acquire(other, "h4.example"))
    for p in permits:
        p.release()


def test_busy_acquire_holds_no_slot_all_or_nothing(state_dir):
    gates = make(state_dir, per_host=16, per_caller=16)
    hosts, callers = distinct(gates, "h", 10, 64), distinct(gates, "c", 10, CALLER_BUCKETS)
    fill = [gates.acquire(callers[i], hosts[i]) for i in range(8)]
    before = gates.in_use()
    # The newcomer's caller and host slots are free, so they are taken before the global
    # group says no; all of them must be handed back.
    assert busy_limit(gates, callers[8], hosts[8]) == "global"
    assert gates.in_use() == before
    # Seen from another opener of the directory (own fds, like another process): the
    # newcomer's caller group and its host's group are entirely free.
    other = make(state_dir, global_=64, per_host=16, per_caller=16)
    probe = [other.acquire(callers[8], hosts[9]) for _ in range(16)]
    probe += [other.acquire(callers[9], hosts[8]) for _ in range(16)]
    for p in fill + probe:
        p.release()


def test_release_frees_the_slots(state_dir):
    gates = make(state_dir, global_=1)
    permit = gates.acquire("c", "h.example")
    assert busy_limit(gates, "c", "h.example") == "global"
    permit.release()
    assert permit.released
    assert gates.in_use() == {"global": 0, "host": 0, "caller": 0}
    gates.acquire("c", "h.example").release()


def test_release_is_idempotent_and_never_frees_a_later_holders_slot(state_dir):
    gates = make(state_dir, global_=1)
    first = gates.acquire("c", "h.example")
    first.release()
    second = gates.acquire("c", "h.example")
    first.release()
    assert gates.in_use()["global"] == 1
    assert busy_limit(gates, "c", "h.example") == "global"
    second.release()


def test_permit_released_after_close_never_frees_a_later_holders_slot(state_dir):
    gates = make(state_dir, global_=1)
    stale = gates.acquire("c", "h.example")
    gates.close()
    current = gates.acquire("c", "h.example")
    stale.release()
    assert busy_limit(gates, "c", "h.example") == "global"
    current.release()


def test_same_slot_cannot_be_held_twice_within_one_process(state_dir):
    gates = make(state_dir, global_=1)
    held = gates.acquire("c", "h.example")
    assert busy_limit(gates, "c", "h.example") == "global"
    # A second opener in the same process has its own fds; flock still excludes it.
    twin = make(state_dir, global_=1)
    assert busy_limit(twin, "c", "h.example") == "global"
    held.release()
    twin.acquire("c", "h.example").release()


def test_permit_releases_as_a_context_manager(state_dir):
    gates = make(state_dir, global_=1)
    with gates.acquire("c", "h.example"):
        assert gates.in_use()["global"] == 1
    assert gates.in_use()["global"] == 0


async def test_permit_releases_as_an_async_context_manager(state_dir):
    gates = make(state_dir, global_=1)
    async with gates.acquire("c", "h.example"):
        assert gates.in_use()["global"] == 1
    assert gates.in_use()["global"] == 0


def test_gates_dir_is_0700_and_slot_files_are_0600(state_dir):
    gates = make(state_dir)
    gates.acquire("c", "h.example").release()
    assert stat.S_IMODE((state_dir / "gates").stat().st_mode) == 0o700
    files = list((state_dir / "gates").iterdir())
    assert len(files) == 3 + 1  # the slot-hash key too
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)


def test_file_count_is_bounded_whatever_the_number_of_hosts(state_dir):
    gates = make(state_dir, per_host=2, per_caller=2, host_buckets=16, caller_buckets=8)
    bound = gates.max_files
    assert bound == 8 + 16 * 2 + 8 * 2
    for i in range(1000):
        # Hold two at once so second slots of the buckets get created too.
        with gates.acquire(f"c{i}", f"h{i}.example"), gates.acquire(f"c{i}", f"h{i}.example"):
            pass
    names = [f.name for f in slot_files(state_dir)]
    assert len({n for n in names if n.startswith("host-")}) == 16 * 2
    assert len(names) <= bound


def test_from_config_uses_state_dir_gates_and_the_configured_limits(state_dir):
    gates = Gates.from_config(state_dir, GatesConfig())
    assert gates.dir == state_dir / "gates"
    assert (gates.global_, gates.per_host, gates.per_caller) == (8, 2, 4)
    assert gates.host_buckets == 4096


def test_idle_slot_fds_are_capped_so_many_hosts_cannot_exhaust_fds(state_dir, monkeypatch):
    monkeypatch.setattr(slots, "MAX_IDLE_FDS", 4)
    gates = make(state_dir, host_buckets=64)
    before = len(os.listdir("/proc/self/fd"))
    for i in range(200):
        gates.acquire(f"c{i}", f"h{i}.example").release()
    # The cap plus the fds of the last release's slots, far fewer than the files touched.
    assert len(os.listdir("/proc/self/fd")) - before <= 4 + 3
    assert len(slot_files(state_dir)) > 40
    gates.acquire("c0", "h0.example").release()


def test_background_work_never_takes_the_last_free_host_slot(tmp_path):
    gates = Gates(tmp_path, global_=8, per_host=2, per_caller=4, host_buckets=4)
    first = gates.acquire("batch", "h", background=True)
    with pytest.raises(Busy):
        gates.acquire("batch", "h", background=True)
    interactive = gates.acquire("agent", "h")
    assert not interactive.released and not first.released


def test_background_work_never_takes_the_last_free_global_slot(tmp_path):
    gates = Gates(tmp_path, global_=3, per_host=4, per_caller=4, host_buckets=64)
    held = [gates.acquire("b", f"h{i}", background=True) for i in range(2)]
    with pytest.raises(Busy):
        gates.acquire("b", "h9", background=True)
    interactive = gates.acquire("agent", "h9")
    assert not interactive.released and len(held) == 2


def test_a_limit_of_one_still_admits_background_work(tmp_path):
    gates = Gates(tmp_path, global_=1, per_host=1, per_caller=1, host_buckets=4)
    with gates.acquire("b", "h", background=True) as permit:
        assert not permit.released


# -- keyed buckets (docs/GATES.md §Keyed buckets) ------------------------------------------------


def _unkeyed_bucket(host: str, buckets: int) -> int:
    """The slot hash before it was keyed: public, so anyone could compute it."""
    digest = hashlib.blake2b(host.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % buckets


def test_hosts_chosen_to_collide_under_the_public_hash_no_longer_share_a_slot(state_dir):
    victim = "en.wikipedia.org"
    chosen = [
        n
        for n in (f"x{i}.attacker.example" for i in range(5000))
        if _unkeyed_bucket(n, 64) == _unkeyed_bucket(victim, 64)
    ][:8]
    assert len(chosen) == 8
    (state_dir / "gates").mkdir(mode=0o700)
    key = state_dir / "gates" / slots.SECRET_FILE
    key.write_bytes(bytes(range(32)))  # a fixed deployment key, so the test is exact
    key.chmod(0o600)
    gates = make(state_dir, global_=64, per_host=1, per_caller=64, host_buckets=64)
    held = [gates.acquire("attacker", n) for n in chosen]  # each its own slot, none refused
    victim_fetch = gates.acquire("someone", victim)  # and the victim is not held by them
    for p in [*held, victim_fetch]:
        p.release()


def test_the_slot_hash_key_is_made_once_0600_and_differs_between_deployments(tmp_path):
    a = Gates(tmp_path / "a", global_=8, per_host=2, per_caller=4, host_buckets=64)
    again = Gates(tmp_path / "a", global_=8, per_host=2, per_caller=4, host_buckets=64)
    other = Gates(tmp_path / "b", global_=8, per_host=2, per_caller=4, host_buckets=64)
    key = tmp_path / "a" / slots.SECRET_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_bytes()) == slots.SECRET_BYTES
    assert a._table.secret() == again._table.secret() != other._table.secret()
    hosts = [f"h{i}.example" for i in range(64)]
    assert [a.host_bucket(h) for h in hosts] == [again.host_bucket(h) for h in hosts]
    assert [a.host_bucket(h) for h in hosts] != [other.host_bucket(h) for h in hosts]


def test_a_slot_hash_key_readable_by_others_is_refused(tmp_path):
    (tmp_path / "g").mkdir(mode=0o700)
    key = tmp_path / "g" / slots.SECRET_FILE
    key.write_bytes(b"k" * 32)
    key.chmod(0o644)
    with pytest.raises(OSError, match="0600"):
        Gates(tmp_path / "g", global_=8, per_host=2, per_caller=4, host_buckets=64)


def test_each_caller_has_a_per_caller_limit_of_its_own(state_dir):
    """docs/GATES.md §Bounded file count: callers never share a limit by hashing (256 buckets
    had one pair in ten callers sharing)."""
    gates = make(state_dir, per_host=64, per_caller=1)
    callers = [f"workspace/agent-{i}" for i in range(200)]
    key = gates._table.secret()
    assert len({bucket(c, CALLER_BUCKETS, key) for c in callers}) == len(callers)
    permits = [gates.acquire(c, f"h{i}.example") for i, c in enumerate(callers[:8])]
    for p in permits:
        p.release()


def test_a_permit_handed_over_is_adopted_by_the_fetch_of_the_same_caller_and_host(state_dir):
    """docs/GATES.md §Interactive fetches win: one take per batch target."""
    gates = make(state_dir)
    permit = gates.acquire("c", "example.org", background=True)
    with handed_over(permit):
        assert gates.acquire("c", "Example.org.", background=True) is permit
        assert gates.in_use() == {"global": 1, "host": 1, "caller": 1}
    assert permit.released and gates.in_use() == {"global": 0, "host": 0, "caller": 0}


def test_a_permit_handed_over_for_another_host_is_given_back_before_taking_anew(state_dir):
    gates = make(state_dir, per_host=1, global_=2)
    a, b = distinct(gates, "host", 2, 64)  # two fixed names share a keyed bucket one time in 64
    permit = gates.acquire("c", a, background=True)
    with handed_over(permit):
        # global_=2: holding the handed slots as well would leave batch work no global slot
        other = gates.acquire("c", b, background=True)
        assert other is not permit and permit.released
        assert gates.in_use() == {"global": 1, "host": 1, "caller": 1}
        other.release()
