"""`fetch_target(caller, target)`: one target for one caller, for `/v1/fetch` and the worker.

Steps (docs/ARCHITECTURE.md §One target, start to finish): guard pre-check → gates → content cache →
HTTP fetch (guarded) → recover → render → pages / grep / jq → question → context → envelope, every
value capped (`sift.fetch.envelope`). Nothing here depends on an HTTP request, so the worker
runs exactly the same code. CPU-heavy steps (extraction, PDF text, grep, ranking) run in a
render child (`sift.fetch.renderpool`), so a hostile document fails only its own target, and
everything after the download shares one time budget, `[render] timeout`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from yarl import URL

from sift.auth import Caller
from sift.config import Config
from sift.errors import (
    BotWall,
    Busy,
    HostWait,
    InvalidTarget,
    TargetError,
    Timeout,
    Upstream4xx,
    Upstream5xx,
    UpstreamUnreachable,
    verdict_error,
    without_hint,
)
from sift.fetch import (
    cap,
    contenttype,
    digest,
    grep,
    jq,
    narrow,
    pagemeta,
    pdf,
    render,
    renderpool,
)
from sift.fetch import envelope as envelope_caps
from sift.fetch.http import HttpClient, Response
from sift.fetch.recover import fetch_archived
from sift.fetch.renderpool import RenderPool
from sift.fetch.robots import Robots
from sift.fetch.target import ACCEPTABLE_VERDICTS, Target
from sift.gates import Gates, host_key
from sift.guard import Policy, precheck
from sift.log import fetch_event
from sift.store import STORE_ERRORS, CachedResponse, Store
from sift.timefmt import rfc3339

log = logging.getLogger("sift.fetch")
T = TypeVar("T")

SHAPED_ENTRIES = 64  # shaped envelopes remembered for content-cache hits
SHAPED_MAX_CHARS = 200_000
RECOVERABLE = (Upstream4xx, Upstream5xx, UpstreamUnreachable, Timeout, BotWall)


class Pipeline:
    """The per-process fetch machinery: HTTP session, guard policy, gates, caches."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        http: HttpClient,
        gates: Gates,
        *,
        clock: Callable[[], float] = time.time,
    ):
        self.cfg = cfg
        self.store = store
        self.http = http
        self.gates = gates
        self.policy = http.policy
        self.clock = clock
        self.render = RenderPool(cfg.render)
        self.robots = Robots(cfg.fetch, http, store.politeness, self.render, clock=clock)
        self._shaped: OrderedDict[tuple, dict[str, Any]] = OrderedDict()

    @classmethod
    async def open(
        cls,
        cfg: Config,
        store: Store,
        *,
        resolver=None,
        clock: Callable[[], float] = time.time,
        gates: Gates | None = None,
    ) -> Pipeline:
        """`gates`: the worker's own, which its drain takes each target's slots from and hands
        to the fetch (docs/WORKER.md §The scheduler); else the pipeline opens its own."""
        policy = Policy.from_config(cfg.guard)
        http = HttpClient(cfg.fetch, policy, resolver=resolver, clock=clock)
        # Engine postgres: the limits hold across every box (docs/GATES.md §Across boxes).
        dsn = cfg.store.dsn if cfg.store.engine == "postgres" else ""
        if gates is None:
            gates = Gates.from_config(cfg.state_dir, cfg.gates, dsn=dsn)
        pipeline = cls(cfg, store, http, gates, clock=clock)
        pipeline.render.prestart()
        return pipeline

    async def close(self) -> None:
        await self.http.close()
        self.gates.close()
        await self.render.close()

    # -- the pipeline -------------------------------------------------------------------------

    async def fetch_target(
        self, caller: Caller, target: Target, *, background: bool = False
    ) -> dict[str, Any]:
        """The success envelope, or a `TargetError` with the status docs/API.md §Failure table gives
        it.

        `background` marks batch work: it never takes the last free gate slot, so interactive
        fetches always win; it obeys robots.txt under `[fetch] robots = "batch"`, and waits
        for the host's spacing (`HostWait`).
        """
        started = time.perf_counter()
        try:
            url = precheck(target.url, self.policy)
            with contextlib.ExitStack() as gate:
                # The gates bound fetches in flight upstream: released once the body is in,
                # so a long render holds a render child, not a host's or caller's slot.
                gate.enter_context(
                    self.gates.acquire(caller.name, url.host or "", background=background)
                )
                spacing = 0.0
                if self.robots.applies(background):
                    rules = await self.robots.check(url, caller.identity)
                    delay = rules.crawl_delay() or 0.0
                    spacing = min(delay, self.cfg.fetch.crawl_delay_max)
                pace = spacing if background else None
                envelope = envelope_caps.bounded(
                    await self._fetch(caller, target, url, pace, gate.close),
                    self.cfg.fetch.output_cap,
                )
        except TargetError as e:
            if isinstance(e, Busy) and e.retry_after is None:
                e.retry_after = self.clock() + self.cfg.batch.retry_wait
            fetch_event(
                log,
                "fetch failed",
                restricted=caller.restricted,
                level=logging.INFO,
                outcome=e.outcome,
                url=target.url,
                error=e.msg,
                caller_class=caller.cls,
                seconds=round(time.perf_counter() - started, 4),
            )
            raise
        fetch_event(
            log,
            "fetched",
            restricted=caller.restricted,
            outcome="ok",
            url=target.url,
            caller_class=caller.cls,
            cached=envelope["cached"],
            chars=envelope["chars"],
            seconds=round(time.perf_counter() - started, 4),
        )
        return envelope

    async def _fetch(
        self,
        caller: Caller,
        target: Target,
        url: URL,
        pace: float | None,
        downloaded: Callable[[], None],
    ) -> dict[str, Any]:
        """`pace`: a batch fetch, whose live request waits for the host's not-before time
        and then moves it `pace` seconds on; `downloaded` frees the gates once the body is in."""
        now = self.clock()
        caching = self.store.cache.enabled
        hit = await self._cache_hit(caller, target, now) if caching else None
        cached = hit is not None
        archived_at, source = None, "live"
        if hit is not None:
            resp = Response(hit.url, hit.final_url, hit.status, hit.content_type, hit.body)
            fetched_at = hit.fetched_at
        else:
            resp, archived_at, source = await self._download(caller, target, url, pace)
            fetched_at = self.clock()
        downloaded()
        memo_key = (
            (caller.cache_partition, target.url, fetched_at, target.options_json())
            if caching
            else None
        )
        shaped = self._shaped.get(memo_key) if cached else None
        if shaped is not None:
            self._shaped.move_to_end(memo_key)
            envelope = dict(shaped, cached=True, source=source, fetched_at=rfc3339(fetched_at))
            return envelope
        kind = contenttype.classify(resp.content_type, resp.body[:1024], resp.final_url)
        put = None
        if caching and not cached and source == "live":
            # The cache write starts now on the database thread and proceeds during the render.
            entry = CachedResponse(
                target.url, resp.final_url, resp.status, resp.content_type, resp.body, fetched_at
            )
            put = self.store.cache.put(caller.cache_partition, entry, fetched_at)
        envelope = await self._shape_in_time(caller, target, resp, kind, put)
        if caching and source == "live":
            self._remember(memo_key, envelope)
        envelope.update(cached=cached, source=source, fetched_at=rfc3339(fetched_at))
        if archived_at:
            envelope["archived_at"] = archived_at
        return envelope

    async def _cache_hit(self, caller: Caller, target: Target, now: float):
        """The cached response, unless it is older than the caller accepts
        (docs/API.md §POST /v1/fetch, max_age)."""
        hit = await self._best_effort(self.store.cache.get(caller.cache_partition, target.url, now))
        max_age = target.max_age
        if hit is not None and max_age is not None and now - hit.fetched_at >= max_age:
            return None
        return hit

    async def _download(
        self, caller: Caller, target: Target, url: URL, pace: float | None
    ) -> tuple[Response, str | None, str]:
        """The live response, or with `recover` the archived copy when the live one fails:
        (response, archived_at, source)."""
        if pace is not None:
            await self._pace(url, pace)
        try:
            return await self.http.get(target.url, checked=url), None, "live"
        except RECOVERABLE as e:
            if e.retry_after is not None:  # the site said when; its batch work waits
                answered = e.answered_by or host_key(url.host or "")
                await self._best_effort(
                    self.store.politeness.defer(answered, e.retry_after, self.clock())
                )
            if not target.recover:
                raise
            archived = await self._recover(caller, target, e)
            return archived.response, archived.archived_at, "archive"

    async def _shape_in_time(
        self,
        caller: Caller,
        target: Target,
        resp: Response,
        kind: str,
        put: Awaitable[Any] | None,
    ) -> dict[str, Any]:
        """The envelope, shaped within the render timeout; the cache write `put` is awaited
        whatever happens to the render."""
        try:
            async with asyncio.timeout(self.cfg.render.timeout) as budget:
                steps = _Steps(self.render, caller, budget)
                return await self._shape(caller, target, resp, kind, steps)
        except TimeoutError:
            raise steps.timeout() from None
        finally:
            if put is not None:
                await self._best_effort(put)

    async def _pace(self, url: URL, spacing: float) -> None:
        """Take the host's next start, or raise `HostWait` until its not-before time."""
        wait = await self._best_effort(
            self.store.politeness.reserve(host_key(url.host or ""), self.clock(), spacing)
        )
        if wait is not None:
            raise HostWait(retry_after=wait)

    @staticmethod
    async def _best_effort(call: Awaitable[T]) -> T | None:
        """A busy or broken database costs the cache hit (or entry), not the fetch."""
        try:
            return await call
        except STORE_ERRORS as e:
            log.warning(
                "cache unavailable; fetching without it",
                extra={"fields": {"error_type": type(e).__name__}},
            )
            return None

    def _remember(self, key: tuple, envelope: dict[str, Any]) -> None:
        """Keep the shaped envelope of a cached response, so a cache hit skips the render."""
        if envelope["chars"] > SHAPED_MAX_CHARS:
            return
        self._shaped[key] = dict(envelope)
        while len(self._shaped) > SHAPED_ENTRIES:
            self._shaped.popitem(last=False)

    async def _recover(self, caller: Caller, target: Target, original: TargetError):
        def run_cpu(fn, *args):
            return self.render.run(caller.identity, fn, *args, timeout=self.cfg.render.timeout)

        try:
            return await fetch_archived(
                self.http, self.cfg.recover.archive_url, target.url, run_cpu
            )
        except TargetError as e:
            err = type(original)(
                f"{original.msg}; recover failed: {e.msg}",
                hint=original.hint,
                retry_after=original.retry_after,
                **original.extra,
            )
            err.retryable = original.retryable
            raise without_hint(err, "recover") from None

    async def _shape(
        self, caller: Caller, target: Target, resp: Response, kind: str, steps: _Steps
    ) -> dict[str, Any]:
        """The envelope from the response: jq, or render → pages → grep → question → cap, in
        the order docs/API.md §POST /v1/fetch applies them. The render child that makes the
        content also greps, picks the question's passages and caps it (`narrow`), in one step."""
        digest_cfg = self.cfg.digest if target.question else None  # sent to the child only then
        want = narrow.Want(target.grep, target.question, digest_cfg, self.cfg.fetch.output_cap)
        done = await self._made(target, resp, kind, steps, want)
        made, extra = done.made, {}
        title, metadata, seen = "", pagemeta.empty(), "ok"  # jq: no page to judge
        if isinstance(made, render.Rendered):
            title, metadata, seen = made.title, made.metadata, made.verdict
        elif isinstance(made, pdf.PdfText):
            title = made.title
            extra["pages"] = {"total": made.total, "returned": made.returned}
        content, truncated, hint = done.content, done.truncated, done.hint
        if done.matches is not None:
            extra["matches"] = done.matches
            if not done.matches:
                extra["note"] = grep.NO_MATCH_NOTE
        if done.asked is not None:
            answer = await self._answer(caller, target, done.asked)
            extra["answer_by"] = answer.answer_by
            if target.wants_context:
                extra["context"] = answer.context
            content, truncated, hint = cap.apply_cap(
                answer.answer, self.cfg.fetch.output_cap, is_pdf=kind == "pdf"
            )
        envelope: dict[str, Any] = {
            "success": True,
            "url": target.url,
            "final_url": resp.final_url,
            "status": resp.status,
            "content_type": resp.content_type.split(";")[0].strip() or kind,
            "title": title,
            "metadata": metadata,
            "verdict": seen,
            "mode": target.mode,
            "content": content,
            "truncated": truncated,
            "chars": len(content),
            "bytes": len(resp.body),
        }
        if truncated and hint:
            envelope["hint"] = hint
        envelope.update(extra)
        return envelope

    async def _made(
        self, target: Target, resp: Response, kind: str, steps: _Steps, want: narrow.Want
    ) -> narrow.Narrowed:
        """The content from the response (jq, a PDF's text or the rendered page), narrowed."""
        if target.jq:
            made = narrow.Text(await self._jq(target, resp, kind, steps))
            if target.grep or target.question:
                return await steps.run(narrow.narrow, made, want)
            return narrow.narrow(made, want)  # the cap alone: no parse
        if kind == "pdf":
            return await steps.run(
                narrow.made,
                pdf.pdf_text_checked,
                want,
                resp.body,
                self.cfg.render.pdf_stream_max,
                target.pages,
                self.cfg.fetch.max_pdf_pages,
                target.mode,
            )
        return await self._render(target, resp, kind, steps, want)

    async def _jq(self, target: Target, resp: Response, kind: str, steps: _Steps) -> str:
        """The jq program's output, in the jq pool under what is left of the render time."""
        if kind != "json":
            raise InvalidTarget("jq needs a JSON response; this one is " + kind)
        async with self.render.jq_slot(steps.owner) as run:
            return await jq.run_jq(
                target.jq,
                resp.body,
                timeout=min(jq.TIMEOUT, steps.left()),
                max_output=self.cfg.fetch.max_body,
                nice=renderpool.HEAVY_NICE if self.render.is_heavy(steps.owner) else 0,
                memory=run.memory,
                started=run.started,
            )

    async def _render(
        self, target: Target, resp: Response, kind: str, steps: _Steps, want: narrow.Want
    ) -> narrow.Narrowed:
        """The rendered page, narrowed, refused when its verdict is one the caller did not
        accept (docs/API.md §Verdicts)."""
        if target.pages:
            raise InvalidTarget("pages applies to PDF responses only; this one is " + kind)
        done = await steps.run(
            narrow.made,
            render.render_body,
            want,
            kind,
            resp.body,
            resp.content_type,
            target.mode,
            resp.final_url,
            target.links,
            target.images,
        )
        seen = done.made.verdict
        if seen in ACCEPTABLE_VERDICTS and seen not in target.accept_verdicts:
            raise verdict_error(seen, resp.status)
        return done

    async def _answer(self, caller: Caller, target: Target, asked: tuple):
        store, now = self.store, self.clock()

        async def cache_get(key: str):
            return await self._best_effort(store.digests.get(caller.cache_partition, key, now))

        async def cache_put(key: str, value: str):
            await self._best_effort(store.digests.put(caller.cache_partition, key, value, now))

        return await digest.answer_prepared(
            target.question,
            asked,
            cfg=self.cfg.digest,
            session=None,  # the operator's endpoint: not a caller's URL, so not guarded
            cache_get=cache_get,
            cache_put=cache_put,
        )


class _Steps:
    """The CPU steps of one target: run in a render child, for its caller, within the time
    left of the target's `[render] timeout` budget."""

    def __init__(self, pool: RenderPool, caller: Caller, budget: asyncio.Timeout):
        self.pool = pool
        self.owner = caller.identity
        self._budget = budget

    def left(self) -> float:
        when = self._budget.when()
        return float("inf") if when is None else when - asyncio.get_running_loop().time()

    async def run(self, fn, *args):
        return await self.pool.run(self.owner, fn, *args, timeout=self.left())

    def timeout(self) -> Timeout:
        return renderpool.timeout_error(self.pool.cfg)
