"""The worker's fetch function: every batch target goes through the per-target pipeline.

`make_fetch(cfg, store)` returns the FetchFn the runner calls with each claimed target; it runs
the target as the job's caller (name and class from the job row). Call `open()` before the
first target and `close()` at exit (or use `open_fetch`).

TEST HOOK: when the environment variable `SIFT_WORKER_FAKE_FETCH` is set (e.g. `sleep:0.2`),
no target is fetched: each one sleeps that many seconds and returns a small success envelope.
Process tests use it to control timing without a network. It is read from the worker's own
environment at start only; nothing an API caller sends can reach it. The worker logs a warning
when it is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

from sift.auth import Caller
from sift.batch import FetchFn
from sift.config import Config, ConfigError
from sift.fetch.target import Target
from sift.store import Claim, Store

FAKE_FETCH_ENV = "SIFT_WORKER_FAKE_FETCH"  # test hook, see the module docstring

log = logging.getLogger("sift.worker")


class PipelineFetch:
    """Targets through `sift.fetch.pipeline.Pipeline`, opened once per worker."""

    def __init__(self, cfg: Config, store: Store):
        self.cfg = cfg
        self.store = store
        self._pipeline: Any = None

    async def open(self) -> None:
        from sift.fetch.pipeline import Pipeline  # the HTTP stack loads only in the worker

        self._pipeline = await Pipeline.open(self.cfg, self.store)

    async def __call__(self, claim: Claim) -> dict:
        caller = Caller.from_owner(claim.caller, claim.caller_class)
        target = Target.from_stored(claim.url, claim.options)
        return await self._pipeline.fetch_target(caller, target, background=True)

    async def close(self) -> None:
        if self._pipeline is not None:
            await self._pipeline.close()
            self._pipeline = None


class FakeFetch:
    """TEST HOOK: sleep, then answer a small envelope; no network at all."""

    def __init__(self, spec: str):
        kind, _, arg = spec.partition(":")
        try:
            self.seconds = float(arg)
        except ValueError:
            self.seconds = -1.0
        if kind != "sleep" or self.seconds < 0:
            raise ConfigError(f"{FAKE_FETCH_ENV}={spec!r}: expected sleep:SECONDS")

    async def open(self) -> None:
        log.warning("worker: TEST HOOK %s is set: targets are not fetched", FAKE_FETCH_ENV)

    async def __call__(self, claim: Claim) -> dict:
        await asyncio.sleep(self.seconds)
        return {"success": True, "url": claim.url, "content": "fake", "source": "test-hook"}

    async def close(self) -> None:
        pass


def make_fetch(cfg: Config, store: Store) -> PipelineFetch | FakeFetch:
    """The production FetchFn, or the test hook's fake when its variable is set."""
    spec = os.environ.get(FAKE_FETCH_ENV)
    if spec:
        return FakeFetch(spec)
    return PipelineFetch(cfg, store)


@contextlib.asynccontextmanager
async def open_fetch(cfg: Config, store: Store) -> AsyncIterator[FetchFn]:
    fetch = make_fetch(cfg, store)
    await fetch.open()
    try:
        yield fetch
    finally:
        await fetch.close()
