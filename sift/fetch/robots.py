"""robots.txt (RFC 9309) for Sift's fetches: fetched once per origin, shared, obeyed.

Which fetches obey it is `[fetch] robots`: `batch` (the default: batch targets do, while an
interactive fetch, which a person asked for, does not), `always` or `never`. The rules are
matched for the product token of our User-Agent (`Sift` in `Sift/0.1 (...)`), as RFC 9309 §2.2.1
asks. protego parses them in a render child (`robotsrules`), and the process keeps only the
rules for our token, bounded in bytes across origins (docs/WORKER.md §robots.txt).

The file is fetched through the same guard as any target, under the gate slots the target
already holds, with a 500 KiB cap (longer files are cut there, RFC 9309 §2.5) and at most 5
redirects. Its verdict is kept per origin in the store, so both processes share it, for
`[fetch] robots_ttl` (24 h at most); a file that could not be read is asked for again after
`UNREACHABLE_TTL`. What the answer means (RFC 9309 §2.3.1): 2xx → its rules; 4xx → no rules,
everything allowed (so too after more than 5 redirects); 5xx, 429, unreachable or timed out →
everything disallowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protego._utils import _quote_path
from yarl import URL

from sift.config import FetchConfig
from sift.errors import (
    Blocked,
    Refused,
    RenderFailed,
    RobotsDisallowed,
    TargetError,
    Timeout,
    TooLong,
    TooManyRedirects,
)
from sift.fetch import content_signals
from sift.fetch.http import HttpClient
from sift.fetch.renderpool import RenderPool
from sift.fetch.robotsrules import RULES_OVERHEAD, RobotsRules, first_match, read_rules
from sift.store import STORE_ERRORS, Politeness, RobotsEntry

ROBOTS_MAX_BYTES = 500 * 1024  # RFC 9309 §2.5: a crawler must parse at least 500 KiB
ROBOTS_TIMEOUT = 10.0  # seconds at most for the robots.txt fetch
UNREACHABLE_TTL = 300.0  # seconds a "could not read it" verdict is kept
RULES_MEMORY = 16 * 1024 * 1024  # bytes of robots rules a process keeps, all origins together
INLINE_RULES = 4 * 1024  # rules up to this size are matched here; larger ones in a render child
UNREACHABLE = 0  # the stored status when no HTTP answer came
REDIRECT_LOOP = 1  # the stored status after too many redirects: no rules, like a 4xx
_TOKEN = re.compile(r"[A-Za-z_-]+")


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent (`Sift/0.1 (+…)` → `Sift`); `*` when it has none."""
    m = _TOKEN.match(user_agent.strip())
    return m.group(0) if m else "*"


def origin_of(url: URL) -> str:
    """scheme://host[:port]: robots.txt applies per origin (RFC 9309 §2.3)."""
    return str(url.origin())


@dataclass(frozen=True, slots=True)
class Rules:
    """One origin's verdict: its rules for our token, or allow-all / disallow-all."""

    status: int
    rules: RobotsRules | None  # None: no rules apply (4xx) or nothing may be fetched (5xx)
    expires_at: float

    @property
    def signals(self) -> content_signals.Signals:
        """Its Content-Signal lines (read in the same parse as the rules)."""
        return content_signals.NONE if self.rules is None else self.rules.signals

    @property
    def disallow_all(self) -> bool:
        return self.status == UNREACHABLE or self.status == 429 or self.status >= 500

    def unavailable(self) -> RobotsDisallowed:
        why = "could not be read" if self.status == UNREACHABLE else f"HTTP {self.status}"
        err = RobotsDisallowed(
            f"robots.txt unavailable ({why}), which disallows / for this agent until it "
            "can be read",
            retry_after=self.expires_at,
        )
        err.retryable = True  # the site's own trouble: a later read may allow it
        return err

    def crawl_delay(self) -> float | None:
        return None if self.rules is None else self.rules.crawl_delay


def refusal_for(decided: tuple[bool, str] | None) -> RobotsDisallowed | None:
    """The error for a path the deciding rule disallows, or None when it may be fetched."""
    if decided is None or decided[0]:
        return None
    return RobotsDisallowed(f"robots.txt disallows {decided[1]} for this agent")


class Robots:
    """robots.txt for one process: the store's shared verdicts, each file parsed once in a
    render child, and the rules of the recently used origins, bounded in bytes."""

    def __init__(
        self,
        cfg: FetchConfig,
        http: HttpClient,
        store: Politeness,
        pool: RenderPool,
        *,
        clock: Callable[[], float],
        memory: int = RULES_MEMORY,
    ):
        self.cfg = cfg
        self.http = http
        self.store = store
        self.pool = pool
        self.clock = clock
        self.memory = memory
        self.token = product_token(cfg.user_agent)
        self._parsed: OrderedDict[str, Rules] = OrderedDict()
        self._kept = 0  # bytes of the rules in `_parsed`
        self._loading: dict[str, asyncio.Future[Rules]] = {}

    def applies(self, background: bool) -> bool:
        mode = self.cfg.robots
        return mode == "always" or (mode == "batch" and background)

    async def check(self, url: URL, owner: Any = None) -> Rules:
        """The origin's rules; raises `RobotsDisallowed` when they forbid `url`. `owner`: whose
        render share a parse, or a large rule set's match, counts against."""
        rules = await self.rules(origin_of(url), owner)
        if rules.disallow_all:
            raise rules.unavailable()
        path = _quote_path(str(url))
        if path == "/robots.txt" or rules.rules is None:
            return rules
        if rules.rules.allows:
            if rules.rules.nbytes <= INLINE_RULES:
                decided = first_match(rules.rules, path)
            else:
                decided = await self.pool.run(
                    owner, first_match, rules.rules, path, timeout=self.pool.cfg.timeout
                )
            refusal = refusal_for(decided)
            if refusal is not None:
                raise refusal
        if self.cfg.content_signals == "obey":
            said = content_signals.refusal(rules.signals, url.raw_path_qs, self.token)
            if said:  # docs/WORKER.md §Content Signals: the site's own word, not retryable
                raise RobotsDisallowed(
                    f"robots.txt Content-Signal {said}: the site does not allow its content "
                    "as input to AI"
                )
        return rules

    async def rules(self, origin: str, owner: Any = None) -> Rules:
        now = self.clock()
        rules = self._parsed.get(origin)
        if rules is not None and rules.expires_at > now:
            self._parsed.move_to_end(origin)
            return rules
        loading = self._loading.get(origin)
        if loading is None:  # one load and parse per origin; other tasks await the same one
            loading = asyncio.ensure_future(self._load_rules(origin, owner))
            self._loading[origin] = loading
            loading.add_done_callback(lambda _: self._loading.pop(origin, None))
        return await asyncio.shield(loading)

    @property
    def kept_bytes(self) -> int:
        """Bytes of rules this process keeps now (at most `memory`, or one origin's)."""
        return self._kept

    async def _load_rules(self, origin: str, owner: Any) -> Rules:
        rules = await self._read(await self._load(origin), owner)
        self._keep(origin, rules)
        return rules

    async def _read(self, entry: RobotsEntry, owner: Any) -> Rules:
        """The entry's verdict, its body parsed in a render child under the render bounds; a
        file that cannot be parsed within them is taken as unreadable (everything disallowed)."""
        if not 200 <= entry.status < 300:
            return Rules(entry.status, None, entry.expires_at)
        if not entry.body.strip():
            return Rules(entry.status, RobotsRules(), entry.expires_at)
        try:
            parsed = await self.pool.run(
                owner, read_rules, entry.body, self.token, timeout=self.pool.cfg.timeout
            )
        except (TooLong, Timeout, RenderFailed):
            return Rules(UNREACHABLE, None, min(entry.expires_at, self.clock() + UNREACHABLE_TTL))
        if not isinstance(parsed, RobotsRules):
            raise RenderFailed("the robots.txt parser sent a malformed answer")
        return Rules(entry.status, parsed, entry.expires_at)

    def _keep(self, origin: str, rules: Rules) -> None:
        """Keep `rules`, dropping the least recently used origins past `memory` bytes."""
        old = self._parsed.pop(origin, None)
        if old is not None:
            self._kept -= _size(old)
        self._parsed[origin] = rules
        self._kept += _size(rules)
        while self._kept > self.memory and len(self._parsed) > 1:
            _, dropped = self._parsed.popitem(last=False)
            self._kept -= _size(dropped)

    async def _load(self, origin: str) -> RobotsEntry:
        """The shared verdict, else a fresh one; a store in trouble only costs the sharing."""
        try:
            entry = await self.store.robots_get(origin, self.clock())
        except STORE_ERRORS:
            entry = None
        if entry is None:
            entry = await self._fetch(origin)
            with contextlib.suppress(*STORE_ERRORS):
                await self.store.robots_put(entry)
        return entry

    async def _fetch(self, origin: str) -> RobotsEntry:
        status, body = UNREACHABLE, ""
        try:
            resp = await self.http.get(
                origin + "/robots.txt",
                timeout=min(self.cfg.timeout, ROBOTS_TIMEOUT),
                max_body=ROBOTS_MAX_BYTES,
                truncate=True,
            )
        except (Blocked, Refused):
            raise  # the target itself would be refused the same way
        except TooManyRedirects:
            status = REDIRECT_LOOP  # RFC 9309 §2.3.1.2: may be taken as unavailable
        except TargetError as e:
            status = e.extra.get("upstream_status", UNREACHABLE)
        else:
            status, body = resp.status, resp.body.decode("utf-8", "replace")
        now = self.clock()
        ttl = UNREACHABLE_TTL if Rules(status, None, 0.0).disallow_all else self.cfg.robots_ttl
        return RobotsEntry(origin, now, now + min(ttl, self.cfg.robots_ttl), status, body)


def _size(rules: Rules) -> int:
    return RULES_OVERHEAD if rules.rules is None else rules.rules.nbytes
