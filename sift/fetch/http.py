"""The guarded HTTP client: one session per process, our own redirect loop, bounded bodies.

aiohttp follows redirects itself unless told not to, so every hop is followed here instead and
pre-checked by the guard before it is requested. The connector carries the guard's resolver and
socket factory, so every connect goes only to a checked address; proxies from the environment
are ignored (`trust_env=False`). The body cap is counted on the decompressed stream, which
aiohttp inflates in bounded pieces, so a compression bomb stops at the cap.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

import aiohttp
from yarl import URL

from sift.config import FetchConfig
from sift.errors import (
    Blocked,
    BotWall,
    Timeout,
    TooLong,
    TooManyRedirects,
    UpstreamUnreachable,
    upstream_error,
)
from sift.fetch.retry_after import parse_retry_after
from sift.gates import host_key
from sift.guard import Policy, blocked_reason, join_location, make_connector, precheck
from sift.guard.policy import config_key_for

REDIRECTS = frozenset({301, 302, 303, 307, 308})
ACCEPT = (
    "text/html,application/xhtml+xml,application/pdf,application/json,"
    "text/markdown,text/plain,application/xml;q=0.9,*/*;q=0.5"
)
READ_CHUNK = 64 * 1024
BOT_WALL_STATUSES = frozenset({403, 429, 503})
RETRY_AFTER_STATUSES = frozenset({429, 503})  # where an upstream's Retry-After is honoured
BOT_WALL_MARKERS = (
    b"cf-chl",
    b"challenge-platform",
    b"captcha",
    b"just a moment",
    b"attention required",
    b"are you a robot",
    b"enable javascript and cookies",
)


@dataclass(frozen=True, slots=True)
class Response:
    url: str  # as requested
    final_url: str  # after redirects
    status: int
    content_type: str
    body: bytes


class HttpClient:
    """GETs a URL through the guard; raises the typed errors of docs/API.md §Failure table."""

    def __init__(
        self,
        cfg: FetchConfig,
        policy: Policy,
        *,
        resolver=None,
        clock: Callable[[], float] = time.time,
    ):
        self.cfg = cfg
        self.policy = policy
        self.clock = clock
        self._resolver = resolver
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = make_connector(self.policy, resolver=self._resolver)
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None, connect=self.cfg.connect_timeout),
                headers={
                    "User-Agent": self.cfg.user_agent,
                    "Accept": ACCEPT,
                    "Accept-Encoding": "gzip, deflate",
                },
                auto_decompress=True,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get(
        self,
        url: str,
        *,
        checked: URL | None = None,
        timeout: float | None = None,
        max_body: int | None = None,
        truncate: bool = False,
    ) -> Response:
        """Fetch `url`, pre-checked here unless `checked` is what `precheck(url)` returned.

        Connect-time checks and every redirect hop's pre-check apply either way. `max_body`
        replaces the configured body cap; with `truncate` a longer body is cut there instead
        of failing (robots.txt: RFC 9309 lets a crawler stop reading at 500 KiB).
        """
        limit = self.cfg.timeout if timeout is None else timeout
        cap = self.cfg.max_body if max_body is None else max_body
        try:
            async with asyncio.timeout(limit):
                return await self._follow(url, checked, cap, truncate)
        except TimeoutError:
            raise Timeout(f"upstream did not answer within {limit:g} s") from None
        except aiohttp.ClientError as e:
            reason = blocked_reason(e)
            if reason:
                raise Blocked(f"blocked at connect: {reason}; {config_key_for(reason)}") from None
            raise UpstreamUnreachable(f"upstream unreachable: {_describe(e)}") from None
        except OSError as e:
            reason = blocked_reason(e)
            if reason:
                raise Blocked(f"blocked at connect: {reason}; {config_key_for(reason)}") from None
            raise UpstreamUnreachable(f"upstream unreachable: {e.strerror or e}") from None

    async def _follow(self, url: str, checked: URL | None, cap: int, truncate: bool) -> Response:
        current: URL = checked if checked is not None else precheck(url, self.policy)
        for hop in range(self.cfg.max_redirects + 1):
            async with self.session.get(current, allow_redirects=False) as resp:
                location = _location(resp.headers.get("Location"))
                if resp.status in REDIRECTS and location is not None:
                    if hop == self.cfg.max_redirects:
                        raise TooManyRedirects(f"more than {self.cfg.max_redirects} redirects")
                    current = join_location(current, location, self.policy)
                    continue
                if resp.status >= 400:
                    if resp.status in BOT_WALL_STATUSES:
                        head = (await resp.content.read(8192)).lower()
                        if any(m in head for m in BOT_WALL_MARKERS):
                            raise BotWall(
                                "the site answered with a bot wall (verdict bot_wall); "
                                "the page needs a real browser",
                                upstream_status=resp.status,
                                verdict="bot_wall",
                            )
                    retry_after = None
                    if resp.status in RETRY_AFTER_STATUSES:
                        retry_after = parse_retry_after(
                            resp.headers.get("Retry-After"),
                            now=self.clock(),
                            cap=self.cfg.retry_after_max,
                        )
                    err = upstream_error(resp.status, retry_after=retry_after)
                    err.answered_by = host_key(current.host or "")
                    raise err
                body = await self._read_capped(resp, cap, truncate)
                return Response(
                    url=url,
                    final_url=str(current),
                    status=resp.status,
                    content_type=_text(resp.headers.get("Content-Type", "")),
                    body=body,
                )
        raise AssertionError("unreachable")

    @staticmethod
    async def _read_capped(resp: aiohttp.ClientResponse, cap: int, truncate: bool) -> bytes:
        declared = resp.content_length
        encoded = resp.headers.get("Content-Encoding")
        if declared is not None and declared > cap and not encoded and not truncate:
            raise TooLong(f"body is {declared} bytes, over the {cap}-byte limit")
        chunks, size = [], 0
        async for chunk in resp.content.iter_chunked(READ_CHUNK):
            size += len(chunk)
            if size > cap:
                if truncate:
                    chunks.append(chunk[: len(chunk) - (size - cap)])
                    break
                raise TooLong(f"body is over the {cap}-byte limit (after decompression)")
            chunks.append(chunk)
        return b"".join(chunks)


def _describe(e: aiohttp.ClientError) -> str:
    if isinstance(e, aiohttp.ClientConnectorDNSError):
        return "the host name could not be resolved"
    if isinstance(e, aiohttp.ClientConnectorError):
        return "connection refused or failed"
    if isinstance(e, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    if isinstance(e, aiohttp.ClientPayloadError):
        return "the response body was malformed"
    return type(e).__name__


# aiohttp keeps header bytes that are not UTF-8 as lone surrogates, which no JSON encoder,
# database or log line accepts: they become U+FFFD, or percent-escapes in a Location.
def _text(value: str) -> str:
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _location(value: str | None) -> str | None:
    if value is None:
        return None
    raw = value.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return quote(raw, safe="!#$%&'()*+,/:;=?@[]~")
