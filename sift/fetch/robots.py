"""robots.txt (RFC 9309) for Sift's fetches: fetched once per origin, shared, obeyed.

Which fetches obey it is `[fetch] robots`: `batch` (the default: batch targets do, while an
interactive fetch, which a person asked for, does not), `always` or `never`. The rules are
matched for the product token of our User-Agent (`Sift` in `Sift/0.1 (...)`), as RFC 9309 §2.2.1
asks. protego parses them (docs/WORKER.md §robots.txt says why a library).

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

from protego import Protego
from yarl import URL

from sift.config import FetchConfig
from sift.errors import Blocked, Refused, RobotsDisallowed, TargetError, TooManyRedirects
from sift.fetch import content_signals
from sift.fetch.http import HttpClient
from sift.store import STORE_ERRORS, Politeness, RobotsEntry

ROBOTS_MAX_BYTES = 500 * 1024  # RFC 9309 §2.5: a crawler must parse at least 500 KiB
ROBOTS_TIMEOUT = 10.0  # seconds at most for the robots.txt fetch
UNREACHABLE_TTL = 300.0  # seconds a "could not read it" verdict is kept
PARSED_ENTRIES = 256  # parsed files kept in memory per process
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
    """One origin's verdict: its parsed rules, or allow-all / disallow-all."""

    status: int
    parser: Protego | None  # None: no rules apply (4xx) or nothing may be fetched (5xx)
    expires_at: float
    signals: content_signals.Signals = content_signals.NONE  # its Content-Signal lines

    @property
    def disallow_all(self) -> bool:
        return self.status == UNREACHABLE or self.status == 429 or self.status >= 500

    def refusal(self, url: URL, token: str) -> RobotsDisallowed | None:
        """The error for a disallowed `url`, or None when it may be fetched."""
        if self.disallow_all:
            why = "could not be read" if self.status == UNREACHABLE else f"HTTP {self.status}"
            err = RobotsDisallowed(
                f"robots.txt unavailable ({why}), which disallows / for this agent until it "
                "can be read",
                retry_after=self.expires_at,
            )
            err.retryable = True  # the site's own trouble: a later read may allow it
            return err
        if self.parser is None or self.parser.can_fetch(str(url), token):
            return None
        path = _matched_path(self.parser, str(url), token)
        where = path if path is not None else "this path"
        return RobotsDisallowed(f"robots.txt disallows {where} for this agent")

    def crawl_delay(self, token: str) -> float | None:
        if self.parser is None:
            return None
        return self.parser.crawl_delay(token)


def _matched_path(parser: Protego, url: str, token: str) -> str | None:
    """The Disallow pattern that matched, for the error message (protego does not expose it,
    so this reads its rule set; None if that ever changes)."""
    try:
        from protego._utils import _quote_path

        path = _quote_path(url)
        rule_set = parser._get_matching_rule_set(token)
        for rule in rule_set._rules:
            if rule.value.match(path):
                return rule.value._pattern if rule.field == "disallow" else None
    except Exception:
        return None
    return None


class Robots:
    """robots.txt for one process: the store's shared verdicts plus a few parsed in memory."""

    def __init__(
        self,
        cfg: FetchConfig,
        http: HttpClient,
        store: Politeness,
        *,
        clock: Callable[[], float],
    ):
        self.cfg = cfg
        self.http = http
        self.store = store
        self.clock = clock
        self.token = product_token(cfg.user_agent)
        self._parsed: OrderedDict[str, Rules] = OrderedDict()
        self._loading: dict[str, asyncio.Future[RobotsEntry]] = {}

    def applies(self, background: bool) -> bool:
        mode = self.cfg.robots
        return mode == "always" or (mode == "batch" and background)

    async def check(self, url: URL) -> Rules:
        """The origin's rules; raises `RobotsDisallowed` when they forbid `url`."""
        rules = await self.rules(origin_of(url))
        refusal = rules.refusal(url, self.token)
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

    async def rules(self, origin: str) -> Rules:
        now = self.clock()
        rules = self._parsed.get(origin)
        if rules is not None and rules.expires_at > now:
            self._parsed.move_to_end(origin)
            return rules
        loading = self._loading.get(origin)
        if loading is None:  # one load per origin per process; other tasks await the same one
            loading = asyncio.ensure_future(self._load(origin))
            self._loading[origin] = loading
            loading.add_done_callback(lambda _: self._loading.pop(origin, None))
        entry = await asyncio.shield(loading)
        rules = _parse(entry)
        self._parsed[origin] = rules
        while len(self._parsed) > PARSED_ENTRIES:
            self._parsed.popitem(last=False)
        return rules

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
        rules = Rules(status, None, 0.0)
        ttl = UNREACHABLE_TTL if rules.disallow_all else self.cfg.robots_ttl
        return RobotsEntry(origin, now, now + min(ttl, self.cfg.robots_ttl), status, body)


def _parse(entry: RobotsEntry) -> Rules:
    parser, signals = None, content_signals.NONE
    if 200 <= entry.status < 300:
        parser = Protego.parse(entry.body)
        signals = content_signals.parse(entry.body)
    return Rules(entry.status, parser, entry.expires_at, signals)
