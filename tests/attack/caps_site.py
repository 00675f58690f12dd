"""A hostile web site for the caps attack tests: each fixture page is a body and its headers,
served on 127.0.0.1 from a thread by a real aiohttp server (`HostileSite.add`), so the API and
worker processes fetch it over loopback like any page."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class HostileSite:
    port: int = 0
    pages: dict[str, tuple[bytes, dict[str, str]]] = field(default_factory=dict)
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None
    _thread: threading.Thread | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def add(self, path: str, body: bytes | str, content_type: str = "text/html") -> str:
        """Serve `body` at `path` from now on; its URL."""
        data = body.encode() if isinstance(body, str) else body
        self.pages[path] = (data, {"Content-Type": content_type})
        return self.url(path)

    def start(self) -> HostileSite:
        ready = threading.Event()

        async def serve(request: web.Request) -> web.Response:
            found = self.pages.get(request.path)
            if found is None:
                raise web.HTTPNotFound()
            body, headers = found
            return web.Response(body=body, headers=headers)

        async def up() -> None:
            app = web.Application()
            app.router.add_get("/{tail:.*}", serve)
            self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
            await self._runner.setup()
            tcp = web.TCPSite(self._runner, "127.0.0.1", 0)
            await tcp.start()
            self.port = tcp._server.sockets[0].getsockname()[1]

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(up())
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=run, name="hostile-site", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the hostile site did not start")
        return self

    def close(self) -> None:
        assert self._loop is not None and self._runner is not None
        fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
