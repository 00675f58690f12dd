"""The API's listening socket: slow or idle clients cannot hold connections, and a flood of
them cannot starve the process of file descriptors (docs/SECURITY.md §Limits and isolation).

* A connection must send a whole request head within `[server] header_timeout` of opening
  (and of its previous response), or it is closed: this is aiohttp's keep-alive timer, which
  also fires on a partial head.
* A request body must arrive within `[server] body_timeout` (`sift.api.body`, 408).
* At most `[server] max_connections` connections are open at once; one more is answered 503
  and closed at once, so callers with open connections are still served and a new one learns
  to retry instead of hanging. Connections accepted in one burst are counted once aiohttp has
  registered them, so a burst can pass the cap by at most the listen backlog (128); the cap
  stays that far and more below the process's file-descriptor limit, so accept() never runs
  out.
* A client that closes its connection cancels its request's work (aiohttp's handler
  cancellation), so abandoned long-polls do not keep counting against the cap.
* The asyncio "accept() out of system resource" error, should it happen anyway, is logged
  once a minute, not once per attempt.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
import time

from aiohttp import web

from sift import memory
from sift.config import ServerConfig

log = logging.getLogger("sift.api")

FD_RESERVE = 256  # descriptors kept for the database, gates, upstream fetches and children
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Retry-After: 2\r\nConnection: close\r\nContent-Length: 76\r\n\r\n"
    b'{"success":false,"error":"too many open connections; retry","hint":"retry"}\n'
)


def connection_cap(configured: int) -> int:
    """`configured`, lowered to fit under the descriptor limit (raised to its hard cap first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(1, min(configured, soft - FD_RESERVE))


class _Refuse(asyncio.Protocol):
    """One connection over the cap: a 503 and a close, nothing read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(BUSY)
        transport.close()


class CappedSite(web.BaseSite):
    """A TCP site whose protocol factory refuses connections past the cap."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, cap: int):
        super().__init__(runner)
        self._host, self._port, self.cap = host, port, cap

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None

        def factory() -> asyncio.BaseProtocol:
            if len(server.connections) >= self.cap:
                return _Refuse()
            return server()

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            factory, self._host, self._port, reuse_address=True, backlog=128
        )


class AcceptErrorsOncePerMinute(logging.Filter):
    """Lets one asyncio accept() error through per minute."""

    def __init__(self, every: float = 60.0):
        super().__init__()
        self.every, self._last = every, float("-inf")

    def filter(self, record: logging.LogRecord) -> bool:
        if "accept" not in record.getMessage():
            return True
        now = time.monotonic()
        if now - self._last < self.every:
            return False
        self._last = now
        return True


def run(app: web.Application, cfg: ServerConfig) -> None:
    """Serve `app` until SIGTERM or SIGINT, then shut down within 5 s."""
    logging.getLogger("asyncio").addFilter(AcceptErrorsOncePerMinute())
    memory.keep_large_blocks_returnable()
    asyncio.run(_serve(app, cfg))


async def _serve(app: web.Application, cfg: ServerConfig) -> None:
    runner = web.AppRunner(
        app,
        access_log=None,
        keepalive_timeout=cfg.header_timeout,
        shutdown_timeout=5,
        # A client that goes away cancels its request's work: a closed long-poll frees its
        # connection slot at once instead of holding it for up to a minute, and a fetch nobody
        # waits for stops (its render child is replaced).
        handler_cancellation=True,
    )
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = CappedSite(runner, cfg.host, cfg.port, connection_cap(cfg.max_connections))
        await site.start()
        await stop.wait()
    finally:
        await runner.cleanup()
