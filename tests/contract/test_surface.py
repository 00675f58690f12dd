"""What `open_store` returns holds every part of the declared surface on both engines
(`sift.store.surface`; the operations' signatures: tests/unit/test_store_surface.py)."""

from __future__ import annotations

import typing

from sift.store import surface


async def test_both_engines_hold_every_part_of_the_store_surface(engine):
    parts = typing.get_type_hints(surface.StoreOps)
    for name in parts:
        assert hasattr(engine.store, name), name
    assert engine.store.engine == engine.name
    assert engine.store.worker.dead_after == 15.0  # `[store] worker_dead_after`
