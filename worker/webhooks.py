"""The webhook sender: the worker's own task, beside the drain (docs/API.md §Webhooks).

It never blocks the drain: it runs as a separate supervised task, each delivery in a task of
its own (at most `[batch] webhook_sends` at once, each try bounded by `[batch]
webhook_timeout`), and it touches the database only to read the next due time and, when a
delivery is due, to take it and record its answer. On PostgreSQL the store pushes a
notification when a delivery is queued, which wakes it at once; on SQLite the worker's own
store wakes it after each commit that queued one, and the API's nudge after a cancel or a
redeliver (`wake`). Either way a new delivery goes out right after its commit, and a retry
when it falls due; nothing ticks while nothing changes (docs/WORKER.md §Webhook sender).

Every try goes through the guard again: the URL's pre-check, then a guarded connector that
judges every address DNS answers (a name that pointed at a public address at submit and at a
private one later is refused; checked answers are reused for 10 s, as for targets) and
follows no redirect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable

import aiohttp
import orjson

from sift.auth import Caller
from sift.batch.wire import event_body
from sift.config import Config
from sift.errors import SiftError
from sift.fetch.retry_after import parse_retry_after
from sift.guard import Policy, blocked_reason, make_connector, precheck
from sift.signing import WebhookSecrets, message_id, sign
from sift.store import STORE_ERRORS, EventRow, Store
from sift.store import webhook_rules as rules
from sift.store.webhook_rules import Delivery
from worker.sleeping import wait_or_timeout

log = logging.getLogger("sift.worker")

TICK = 0.02  # seconds at least between two looks, when a retry falls due sooner
IDLE_POLL = 1.0  # the due time is read at least this often, wake-ups or not
USER_AGENT = "Sift-Webhook/1"
ANSWER_CAP = 64 * 1024  # bytes of a receiver's answer read (and dropped)
RESULT_OMITTED = "larger than a delivery carries; read it with GET /v1/batch/{job_id}"


class WebhookSender:
    def __init__(
        self,
        store: Store,
        cfg: Config,
        *,
        resolver=None,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        tick: float = TICK,
    ):
        """`resolver` replaces the guard's inner DNS resolver (tests)."""
        self.store = store
        self.policy = Policy.from_config(cfg.guard)
        self.timeout = cfg.batch.webhook_timeout
        self.max_sends = cfg.batch.webhook_sends
        self.secrets = WebhookSecrets(cfg.keys_file)
        self.resolver = resolver
        self.clock = clock
        self.rng = rng or random.Random()
        self.tick = tick
        self._tasks: set[asyncio.Task] = set()
        self._session: aiohttp.ClientSession | None = None
        self._woken = asyncio.Event()

    async def run(self) -> None:
        """Send due deliveries until cancelled."""
        self._session = aiohttp.ClientSession(
            connector=make_connector(self.policy, resolver=self.resolver),
            trust_env=False,
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            headers={"User-Agent": USER_AGENT},
        )
        try:
            await self.store.subscribe("hooks", lambda _job: self.wake())
            await self._loop()
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._session.close()

    def wake(self) -> None:
        """A delivery may have been queued (or queued again): take what is due now."""
        self._woken.set()

    async def _loop(self) -> None:
        """Take what is due whenever a delivery is queued, a send ends (a slot is free, a
        retry may be due sooner) or the earliest due time comes, at least every IDLE_POLL.
        A wake-up takes first and reads the next due time after, off the delivery's path; a
        sleep that ran out reads the due time first and takes only if one is due, so an idle
        sender writes nothing."""
        woken = True
        while True:
            self._woken.clear()
            wait = IDLE_POLL
            try:
                due = None if woken else await self.store.webhooks.next_due()
                if woken or (due is not None and due <= self.clock()):
                    due = None
                    if await self._take_due():
                        due = await self.store.webhooks.next_due()
                if due is not None:
                    wait = min(IDLE_POLL, max(self.tick, due - self.clock()))
            except STORE_ERRORS as e:
                log.warning("webhooks: store unavailable (%s)", type(e).__name__)
            await wait_or_timeout(self._woken, wait)
            woken = self._woken.is_set()

    async def _take_due(self) -> bool:
        """Start every due delivery there is a slot for; True when slots are left."""
        while True:
            free = self.max_sends - len(self._tasks)
            if free == 0:
                return False
            taken = await self.store.webhooks.take(
                self.clock(), limit=free, lease=self.timeout + 30
            )
            self._start(taken)
            if len(taken) < free:
                return True

    def _start(self, taken: list[Delivery]) -> None:
        for delivery in taken:
            task = asyncio.create_task(self._deliver(delivery), name="webhook-delivery")
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._woken.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("webhooks: delivery task failed (%s)", type(task.exception()).__name__)

    async def _deliver(self, d: Delivery) -> None:
        status, outcome, retry_after = await self._try(d)
        now = self.clock()
        retry_at = None
        if outcome == "retry":
            retry_at = rules.next_try(d.attempts + 1, now, retry_after, self.rng)
        for attempt in range(3):  # the answer is kept even through a brief database outage
            try:
                await self.store.webhooks.record(
                    d.job_id, d.event_id, status=status, outcome=outcome, retry_at=retry_at
                )
                return
            except STORE_ERRORS:
                await asyncio.sleep(0.5 * (attempt + 1))
        log.warning("webhooks: an answer was not recorded; the delivery will be tried again")

    async def _try(self, d: Delivery) -> tuple[int, str, float | None]:
        """(HTTP status or 0, outcome, seconds the receiver asked to wait)."""
        secret = self.secrets.of(Caller.from_owner(d.caller, d.caller_class))
        if secret is None:
            return 0, "failed", None  # nothing to sign with (the secret file lost its entry)
        try:
            precheck(d.url, self.policy)
        except SiftError:
            return 0, "refused", None
        row = EventRow(d.job_id, d.event_id, d.kind, None, d.at, d.data, result=d.result)
        payload = event_body(row)
        if d.result is None and d.result_bytes > rules.RESULT_MAX:
            payload["data"]["result_omitted"] = RESULT_OMITTED
        body = orjson.dumps(payload)
        msg_id, ts = message_id(d.job_id, d.event_id), int(self.clock())
        headers = {
            "Content-Type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": sign(secret, msg_id, ts, body),
        }
        assert self._session is not None
        try:
            async with self._session.post(
                d.url, data=body, headers=headers, allow_redirects=False
            ) as resp:
                with contextlib.suppress(aiohttp.ClientError):
                    await resp.content.read(ANSWER_CAP)
                wait = None
                if resp.status in (429, 503):
                    now = self.clock()
                    at = parse_retry_after(
                        resp.headers.get("Retry-After"), now=now, cap=rules.RETRY_AFTER_MAX
                    )
                    wait = None if at is None else at - now
                return resp.status, rules.outcome_of(resp.status), wait
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            if blocked_reason(e) is not None:
                return 0, "refused", None
            return 0, "retry", None
