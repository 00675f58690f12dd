"""The worker process's life: lock → restart → listen, drain, beat → stop.

`Worker.run()` takes the singleton lock (standing by while another worker holds it), marks every
job a previous worker left in flight failed with `restart`, then runs four named tasks: the
drain (the runner's 1–2 drain tasks), the nudge listener, the heartbeat and the webhook sender
(`worker.webhooks`). It ends when the stop
event is set (a signal, or `stop()`) or when one of those tasks dies: a worker never runs
half-alive. Either way it stops taking targets, lets the fetch in flight finish within
`batch.grace`, cancels it, and cleans up. Exit code 0 after a requested stop, 1 after a death.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable

from sift.config import Config
from sift.gates import Gates
from sift.log import batch_event
from sift.store import Store, open_store
from worker import signals
from worker.drain import FetchFn, Runner
from worker.fetcher import open_fetch
from worker.heartbeat import beat_forever
from worker.listener import NudgeListener
from worker.lock import SingletonLock
from worker.webhooks import WebhookSender

log = logging.getLogger("sift.worker")

EXIT_OK = 0
EXIT_DIED = 1


class Worker:
    def __init__(
        self,
        cfg: Config,
        *,
        fetch: FetchFn | None = None,
        handle_signals: bool = True,
        clock: Callable[[], float] = time.time,
        resolver=None,
    ):
        """`fetch` replaces the pipeline and `resolver` the webhook sender's DNS (tests);
        `handle_signals=False` leaves signals alone."""
        self.cfg = cfg
        self.fetch = fetch
        self.resolver = resolver
        self.handle_signals = handle_signals
        self.clock = clock
        self.pid = os.getpid()
        # Engine postgres: any number of workers drain together, each with a heartbeat in the
        # database, so there is no singleton lock (docs/WORKER.md §Several workers).
        self.lock = SingletonLock(cfg.state_dir) if cfg.store.engine == "sqlite" else None
        self.runner: Runner | None = None
        self.active = asyncio.Event()  # set once this worker holds the lock and drains
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> int:
        uninstall = signals.install(self._stop) if self.handle_signals else None
        try:
            if self.lock is None:
                return await self._active()
            if not await self.lock.acquire(self._stop):
                return EXIT_OK  # stopped while standing by
            try:
                return await self._active()
            finally:
                self.lock.release()
        finally:
            if uninstall is not None:
                uninstall()

    async def _active(self) -> int:
        store = open_store(self.cfg)
        try:
            async with contextlib.AsyncExitStack() as stack:
                # Engine postgres: the limits hold across every box (docs/GATES.md §Across
                # boxes). One `Gates` for the drain and the pipeline: the slots the drain
                # takes for a target are the ones its fetch adopts.
                dsn = self.cfg.store.dsn if self.cfg.store.engine == "postgres" else ""
                gates = Gates.from_config(self.cfg.state_dir, self.cfg.gates, dsn=dsn)
                stack.callback(gates.close)
                fetch = self.fetch or await stack.enter_async_context(
                    open_fetch(self.cfg, store, gates)
                )
                return await self._serve(store, fetch, gates)
        finally:
            with contextlib.suppress(Exception):
                await store.worker.clear(self.pid)
            await store.aclose()

    async def _serve(self, store: Store, fetch: FetchFn, gates: Gates) -> int:
        started_at = self.clock()
        failed = await store.batch.restart(started_at)
        # sqlite: every live job fails; postgres: only targets of workers whose lease expired.
        what = "jobs" if store.engine == "sqlite" else "targets of dead workers"
        batch_event(
            log,
            f"worker active; {what} left in flight marked failed: restart",
            pid=self.pid,
            count=failed,
            drain_tasks=self.cfg.batch.drain_tasks,
        )
        runner = self.runner = Runner(store, self.cfg.batch, fetch, clock=self.clock, gates=gates)
        # The database wakes every worker (postgres), or the API's datagram does (sqlite).
        woken_by_store = await store.on_work(runner.nudge)
        sender = WebhookSender(store, self.cfg, resolver=self.resolver, clock=self.clock)
        listener = (
            None
            if woken_by_store
            else NudgeListener(self.cfg.state_dir, runner.nudge, runner.slot_freed, sender.wake)
        )
        if listener is not None:
            listener.bind()
            runner.state.room.on_waiting = listener.waiting
        try:
            side = {
                asyncio.create_task(runner.run(), name="drain"),
                asyncio.create_task(
                    beat_forever(store, pid=self.pid, started_at=started_at, clock=self.clock),
                    name="heartbeat",
                ),
            }
            if listener is not None:
                side.add(asyncio.create_task(listener.run(), name="nudge-listener"))
            side.add(asyncio.create_task(sender.run(), name="webhooks"))
            self.active.set()
            code = await self._until_stop_or_death(side)
            await self._wind_down(runner, side)
            return code
        finally:
            if listener is not None:
                listener.close()

    async def _until_stop_or_death(self, side: set[asyncio.Task]) -> int:
        stop = asyncio.create_task(self._stop.wait(), name="stop")
        done, _ = await asyncio.wait(side | {stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        died = [t for t in done if t is not stop]
        for task in died:
            reason = "cancelled" if task.cancelled() else type(task.exception()).__name__
            if not task.cancelled() and task.exception() is None:
                reason = "returned"
            log.error("worker: %s task ended (%s); stopping", task.get_name(), reason)
        return EXIT_DIED if died else EXIT_OK

    async def _wind_down(self, runner: Runner, side: set[asyncio.Task]) -> None:
        """Stop taking targets, give the fetch in flight its grace, then end every task."""
        await runner.shutdown(self.cfg.batch.grace)
        drain = next(t for t in side if t.get_name() == "drain")
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await drain
        for task in side:
            task.cancel()
        await asyncio.gather(*side, return_exceptions=True)
        log.info("worker: stopped")
