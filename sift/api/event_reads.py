"""Event-log reads shared between the streams of one job (docs/API.md §GET
/v1/batch/{job_id}/events)."""

from __future__ import annotations

import asyncio

from sift.store import Store


class SharedReads:
    """The streams of one job wake together, each having read up to the same event: they
    share one read of what follows (one query per job and change, not one per stream)."""

    def __init__(self, store: Store):
        self.store = store
        self._flights: dict[tuple, asyncio.Future] = {}

    async def read(self, job_id: str, after: int, results: bool):
        key = (job_id, after, results)
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(
                self.store.events.read(job_id, after=after, results=results)
            )
            self._flights[key] = flight
            flight.add_done_callback(lambda _: self._flights.pop(key, None))
        return await asyncio.shield(flight)
