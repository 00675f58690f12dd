"""The store's errors, whatever the engine (docs/WORKER.md §Store errors)."""

from __future__ import annotations

from sift.errors import Unavailable


class StoreBusy(Unavailable):
    """The database is busy (another process holds its write lock); try again later."""


class StoreError(Exception):
    """The database file cannot be opened or used."""
