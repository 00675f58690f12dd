"""Gates: cross-process concurrency limits on fetches in flight (docs/GATES.md).

The API and the worker are separate processes, so the limits live in the kernel rather than in
memory: each limit is a group of slot files under `state_dir/gates/` and a fetch in flight
holds one slot of each of its three groups (see `slots.py` and docs/GATES.md):

    global.N           N < global_                     all fetches, both processes
    host-B.N           N < per_host,   B = hash(host)   mod host_buckets
    caller-C.N         N < per_caller, C = hash(caller) mod caller_buckets

Hosts are hashed into a bounded number of buckets so the file count stays bounded whatever
callers ask for; callers (named by the operator) each get a bucket of their own in practice.
The hash is keyed with the deployment's secret (`slots.load_secret`, or the database's on
engine postgres), so which names share a bucket cannot be worked out, let alone chosen, from
outside; two that share one by chance share its limit, which only ever
errs on the side of fewer fetches (docs/GATES.md §Keyed buckets).

`acquire` never waits: it takes a slot of every group or raises `Busy` holding nothing, and
costs a few non-blocking syscalls, so it is safe to call on the event loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from sift.errors import GatesFull, GatesUnreachable
from sift.gates.pg_slots import UNREACHABLE, PgSlotTable
from sift.gates.slots import SlotTable

if TYPE_CHECKING:
    from sift.config import GatesConfig

__all__ = [
    "CALLER_BUCKETS",
    "PG_HOST_BUCKETS",
    "Gates",
    "Permit",
    "bucket",
    "handed_over",
    "host_key",
]

log = logging.getLogger("sift.gates")

# Callers are the keys file's identities, which only the operator makes, so their number (not
# the buckets') bounds the caller files; a bucket space this wide means two callers share a
# per-caller limit with odds of one in 4 billion (with 256, one pair in ten agents did).
CALLER_BUCKETS = 2**32
# Advisory locks cost no file, so on engine postgres each host has a 32-bit bucket of its own
# (two hosts share one with odds of one in 4 billion).
PG_HOST_BUCKETS = 2**32

_BUSY = {
    "caller": "per-caller limit reached ({n} fetches in flight for this caller); try again later",
    "host": "per-host limit reached ({n} fetches in flight to this host); try again later",
    "global": "global limit reached ({n} fetches in flight); try again later",
}


_BUSY_BACKGROUND = (
    "{kind} limit nearly full ({n} slots): batch work leaves the last slot to interactive "
    "fetches; try again later"
)


def bucket(key: str, buckets: int, secret: bytes) -> int:
    """`key`'s bucket under the deployment's `secret`: the same in every process and every run
    (unlike `hash`), and unknowable without the secret."""
    raw = key.encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(raw, digest_size=8, key=secret).digest()
    return int.from_bytes(digest, "big") % buckets


def host_key(host: str) -> str:
    return host.strip().rstrip(".").lower()


class Permit:
    """The slots of one fetch in flight. Release it exactly once (more is harmless)."""

    __slots__ = ("_on_release", "_owner", "_slots", "_table")

    def __init__(
        self,
        table: SlotTable,
        owner: object,
        slots: list[str],
        on_release: Callable[[], object] | None = None,
    ):
        self._table = table
        self._owner = owner
        self._slots = slots
        self._on_release = on_release

    @property
    def released(self) -> bool:
        return not self._slots

    def _fits(self, table: object, groups: list[str]) -> bool:
        return table is self._table and [n.rsplit(".", 1)[0] for n in self._slots] == groups

    def release(self) -> None:
        """Give the slots back. Idempotent: a second call never frees a later holder's slot."""
        slots, self._slots = self._slots, []
        if slots:
            self._table.give_back_all(slots[::-1], self._owner)
        if slots and self._on_release is not None:
            self._on_release()

    def __enter__(self) -> Permit:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    async def __aenter__(self) -> Permit:
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()

    def __del__(self) -> None:
        # A leaked permit would shrink the limits until restart; free it and say so.
        if getattr(self, "_slots", None):
            log.warning("gates: a permit was garbage-collected without release")
            self.release()


# The permit the worker's scheduler took for the batch fetch running in this task: its first
# background acquire of the same caller and host adopts it instead of taking the slots again
# (docs/GATES.md §Interactive fetches win).
_handed: ContextVar[Permit | None] = ContextVar("sift_gates_handed", default=None)


@contextlib.contextmanager
def handed_over(permit: Permit | None) -> Iterator[None]:
    """Run a batch fetch holding `permit` (taken when its target was admitted); whatever the
    fetch does, the permit is released by the end (a fetch that takes no gates frees it here)."""
    token = _handed.set(permit)
    try:
        yield
    finally:
        _handed.reset(token)
        if permit is not None:
            permit.release()


class Gates:
    """The three limits, shared with every process that opens the same directory."""

    def __init__(
        self,
        dir: Path,
        *,
        global_: int,
        per_host: int,
        per_caller: int,
        host_buckets: int,
        caller_buckets: int = CALLER_BUCKETS,
        table: SlotTable | PgSlotTable | None = None,
    ):
        """`table` holds the slots: lock files under `dir` (one box) by default, or PostgreSQL
        advisory locks (`PgSlotTable`, every box on one database)."""
        for name, value in (
            ("global_", global_),
            ("per_host", per_host),
            ("per_caller", per_caller),
            ("host_buckets", host_buckets),
            ("caller_buckets", caller_buckets),
        ):
            if value < 1:
                raise ValueError(f"gates: {name} must be at least 1, got {value}")
        self.dir = Path(dir)
        self.global_ = global_
        self.per_host = per_host
        self.per_caller = per_caller
        self.host_buckets = host_buckets
        self.caller_buckets = caller_buckets
        self._table = table if table is not None else SlotTable(self.dir)
        # Called after a permit's slots are given back: the API process tells the worker, whose
        # drain may be waiting for a slot (docs/WORKER.md §The scheduler).
        self.on_release: Callable[[], object] | None = None

    @classmethod
    def from_config(cls, state_dir: Path, cfg: GatesConfig, *, dsn: str = "") -> Gates:
        """With a PostgreSQL `dsn` (engine postgres) the limits hold across every box."""
        return cls(
            Path(state_dir) / "gates",
            global_=cfg.global_,
            per_host=cfg.per_host,
            per_caller=cfg.per_caller,
            host_buckets=PG_HOST_BUCKETS if dsn else cfg.host_buckets,
            table=PgSlotTable(dsn) if dsn else None,
        )

    @property
    def max_files(self) -> int:
        """The most slot files the directory can ever hold (callers' files are also bounded by
        the number of callers, which is what bounds them with the default bucket count)."""
        return (
            self.global_ + self.host_buckets * self.per_host + self.caller_buckets * self.per_caller
        )

    def acquire(self, caller: str, host: str, *, background: bool = False) -> Permit:
        """Take one slot of each limit for a fetch by `caller` to `host`, or raise `Busy`.

        Narrowest group first, the shared global group last, so a Busy attempt holds global
        slots (which every other fetch competes for) as briefly and as rarely as possible.

        A `background` (batch) fetch never takes the last free slot of the host or global
        limit (where the limit is above 1): that slot is left for interactive fetches, which
        is how interactive work always wins over batch work across both processes. A batch
        fetch the worker's scheduler already took the slots for (`handed_over`) gets that
        permit back: one take per target, not a probe and then a take.
        """
        secret = self._table.secret()
        if secret is None:
            raise GatesUnreachable(UNREACHABLE)
        groups = (
            ("caller", f"caller-{bucket(caller, self.caller_buckets, secret)}", self.per_caller),
            ("host", f"host-{self.host_bucket(host, secret)}", self.per_host),
            ("global", "global", self.global_),
        )
        handed = _handed.get() if background else None
        if handed is not None:
            _handed.set(None)
            if handed._fits(self._table, [prefix for _, prefix, _ in groups]):
                return handed
            handed.release()  # taken for another host (a name the pipeline spelled otherwise)
        owner = object()
        if isinstance(self._table, PgSlotTable):  # one round trip, not one or more per group
            sized = [
                (prefix, size, 1 if background and kind != "caller" and size > 1 else 0)
                for kind, prefix, size in groups
            ]
            taken, full = self._table.take_all(sized, owner)
            if full is not None:
                kind, _, size = groups[full]
                msg = _BUSY_BACKGROUND if sized[full][2] else _BUSY[kind]
                raise GatesFull(msg.format(n=size, kind=kind))
            return Permit(self._table, owner, taken, self.on_release)
        taken = []
        try:
            for kind, prefix, size in groups:
                reserve = 1 if background and kind != "caller" and size > 1 else 0
                name = self._take_one(prefix, size, owner, reserve)
                if name is None:
                    msg = _BUSY_BACKGROUND if reserve else _BUSY[kind]
                    raise GatesFull(msg.format(n=size, kind=kind))
                taken.append(name)
        except BaseException:
            for name in reversed(taken):
                self._table.give_back(name, owner)
            raise
        return Permit(self._table, owner, taken, self.on_release)

    def host_bucket(self, host: str, secret: bytes | None = None) -> int:
        """The bucket whose per-host slots a fetch to `host` takes."""
        return bucket(host_key(host), self.host_buckets, secret or self._table.secret())

    def room(self, caller: str, host: str, *, background: bool = False) -> bool:
        """Whether `acquire` would succeed now (a take and give back; nothing is held after)."""
        try:
            permit = self.acquire(caller, host, background=background)
        except GatesFull:
            return False
        permit._on_release = None  # a probe frees nothing anyone waits for
        permit.release()
        return True

    def _take_one(self, prefix: str, size: int, owner: object, reserve: int = 0) -> str | None:
        return self._table.take_any(prefix, size, owner, reserve)

    def in_use(self) -> dict[str, int]:
        """Slots held by this process (this `Gates`), per limit; no syscalls."""
        counts = {"global": 0, "host": 0, "caller": 0}
        for name in self._table.held():
            counts[name.split("-", 1)[0].split(".", 1)[0]] += 1
        return counts

    def close(self) -> None:
        """Drop every slot this process holds (shutdown, tests); permits become no-ops."""
        self._table.close()
