"""SIGTERM and SIGINT only set the stop event; the worker's loop acts on it."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

log = logging.getLogger("sift.worker")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install(stop: asyncio.Event) -> Callable[[], None]:
    """Route the stop signals to `stop`; returns a function that restores the defaults."""
    loop = asyncio.get_running_loop()

    def handler(sig: signal.Signals) -> None:
        if not stop.is_set():
            log.info("worker: %s received; stopping", sig.name)
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, handler, sig)

    def uninstall() -> None:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    return uninstall
