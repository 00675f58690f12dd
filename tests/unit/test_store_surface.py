"""Both engines implement the store's declared surface, `sift.store.surface` (docs/ARCHITECTURE.md
§The store's surface): every operation with the same name, parameters (names, kinds, defaults)
and awaitability, and no public operation of an engine outside it unless named below."""

from __future__ import annotations

import inspect

import pytest

from sift.store import Store, surface
from sift.store.batch import BatchStore
from sift.store.cache import ContentCache, DigestCache
from sift.store.events import EventLog
from sift.store.pg import PgStore
from sift.store.pg.batch import PgBatchStore
from sift.store.pg.events import PgEventLog
from sift.store.pg.politeness import PgPoliteness
from sift.store.pg.waits import PgWaits
from sift.store.pg.webhooks import PgWebhooks
from sift.store.pg.workers import PgWorkerState
from sift.store.politeness import Politeness
from sift.store.waits import Waits
from sift.store.webhooks import Webhooks
from sift.store.worker_state import WorkerState

PARTS = [
    (surface.BatchOps, (BatchStore, PgBatchStore)),
    (surface.ContentCacheOps, (ContentCache,)),  # one class, used by both engines
    (surface.DigestCacheOps, (DigestCache,)),
    (surface.WorkerOps, (WorkerState, PgWorkerState)),
    (surface.PolitenessOps, (Politeness, PgPoliteness)),
    (surface.EventOps, (EventLog, PgEventLog)),
    (surface.WebhookOps, (Webhooks, PgWebhooks)),
    (surface.WaitOps, (Waits, PgWaits)),
    (surface.StoreOps, (Store, PgStore)),
]

# Public callables an engine has beyond the surface, and why.
ENGINE_ONLY = {
    PgBatchStore: {"reap"},  # what `restart` and a worker's beat run on this engine
}


def operations(proto: type) -> list[str]:
    return [
        name
        for name, value in vars(proto).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    ]


def shape(value) -> tuple:
    if isinstance(value, property):
        return ("property",)
    sig = inspect.signature(value)
    params = [(p.name, p.kind, p.default) for p in sig.parameters.values()]
    return (inspect.iscoroutinefunction(value), params)


@pytest.mark.parametrize("proto, engines", PARTS, ids=[p[0].__name__ for p in PARTS])
def test_each_engine_takes_every_operation_as_the_surface_declares_it(proto, engines):
    for engine in engines:
        for name in operations(proto):
            assert hasattr(engine, name), f"{engine.__name__} lacks {name}"
            declared = inspect.getattr_static(proto, name)
            assert shape(inspect.getattr_static(engine, name)) == shape(declared), (
                f"{engine.__name__}.{name} differs from {proto.__name__}.{name}"
            )


@pytest.mark.parametrize("proto, engines", PARTS, ids=[p[0].__name__ for p in PARTS])
def test_no_engine_has_a_public_operation_outside_the_surface(proto, engines):
    declared = set(operations(proto))
    for engine in engines:
        public = {
            name
            for name, value in inspect.getmembers(engine)
            if not name.startswith("_") and (callable(value) or isinstance(value, property))
        }
        assert public - declared - ENGINE_ONLY.get(engine, set()) == set(), engine.__name__
