"""Webhook deliveries on PostgreSQL: the operations of `sift.store.webhooks` with the same
rules (`sift.store.webhook_rules`). Several workers may send at once: `take` skips rows another
worker is taking (`FOR UPDATE SKIP LOCKED`) and leases what it takes, in one statement. Queuing
a delivery (with its event, `sift.store.pg.events`) or queuing it again (`redeliver`) notifies
`sift_hooks`, which wakes every worker's sender (docs/WORKER.md §Webhook sender)."""

from __future__ import annotations

from sift.store import series as names
from sift.store import webhook_rules as rules
from sift.store.pg import counters
from sift.store.pg.db import Conn, PgDatabase, changed, one, rows
from sift.store.pg.notify import HOOKS, notify
from sift.store.webhook_rules import Delivery


async def set_webhook(conn: Conn, job_id: str, url: str, kinds, results: bool = False) -> None:
    await conn.execute(
        "insert into batch_webhook(job_id, url, events, results) values (%s, %s, %s, %s)",
        (job_id, url, rules.stored(kinds), int(results)),
    )


async def take(conn: Conn, now: float, limit: int, lease: float) -> list[Delivery]:
    found = await rows(
        conn,
        "with due as (select job_id, event_id from webhook_outbox where state = %s "
        "  and next_try <= %s order by next_try limit %s for update skip locked), "
        "leased as (update webhook_outbox o set next_try = %s from due "
        "  where o.job_id = due.job_id and o.event_id = due.event_id "
        "  returning o.job_id, o.event_id, o.attempts) "
        "select l.job_id, l.event_id, l.attempts, w.url, e.kind, e.at, e.data, j.caller, "
        "j.caller_class, case when w.results = 1 and e.kind = 'target.done' "
        "  and octet_length(t.result) <= %s then t.result end, "
        "case when w.results = 1 and e.kind = 'target.done' then octet_length(t.result) end "
        "from leased l join batch_webhook w on w.job_id = l.job_id "
        "join batch_event e on e.job_id = l.job_id and e.id = l.event_id "
        "join batch_job j on j.id = l.job_id "
        "left join batch_target t on t.job_id = e.job_id and t.idx = e.idx order by e.at",
        (rules.PENDING, now, limit, now + lease, rules.RESULT_MAX),
    )
    return [Delivery(*r[:-1], r[-1] or 0) for r in found]


async def record(
    conn: Conn, job_id: str, event_id: int, *, status: int, outcome: str, retry_at: float | None
) -> bool:
    outcome, state, next_try = rules.recorded(outcome, retry_at)
    n = await changed(
        conn,
        "update webhook_outbox set state = %s, attempts = attempts + 1, last_status = %s, "
        "next_try = %s where job_id = %s and event_id = %s and state = %s",
        (state, status, next_try, job_id, event_id, rules.PENDING),
    )
    if n:
        await counters.bump(conn, names.WEBHOOK_DELIVERIES, outcome)
    return n > 0


async def state(conn: Conn, job_id: str) -> dict | None:
    return rules.summary(
        await rows(
            conn,
            "select event_id, state, attempts, last_status, next_try from webhook_outbox "
            "where job_id = %s",
            (job_id,),
        )
    )


async def redeliver(conn: Conn, job_id: str, now: float) -> int | None:
    if await one(conn, "select 1 from batch_webhook where job_id = %s", (job_id,)) is None:
        return None
    n = await changed(
        conn,
        "update webhook_outbox set state = %s, attempts = 0, next_try = %s "
        "where job_id = %s and state = %s",
        (rules.PENDING, now, job_id, rules.FAILED),
    )
    if n == 0:
        n = await changed(
            conn,
            "update webhook_outbox set state = %s, attempts = 0, next_try = %s "
            "where job_id = %s and state = %s and event_id = "
            "(select max(event_id) from webhook_outbox where job_id = %s)",
            (rules.PENDING, now, job_id, rules.DELIVERED, job_id),
        )
    if n:
        await notify(conn, HOOKS, job_id)
    return n


class PgWebhooks:
    """The store's `webhooks` part on PostgreSQL (see `sift.store.webhooks.Webhooks`)."""

    def __init__(self, db: PgDatabase):
        self._db = db

    async def take(self, now: float, *, limit: int = 16, lease: float = rules.LEASE):
        return await self._db.statement(lambda c: take(c, now, limit, lease))  # one statement

    async def record(
        self, job_id: str, event_id: int, *, status: int, outcome: str, retry_at: float | None
    ) -> bool:
        return await self._db.transaction(
            lambda c: record(c, job_id, event_id, status=status, outcome=outcome, retry_at=retry_at)
        )

    async def state(self, job_id: str) -> dict | None:
        return await self._db.statement(lambda c: state(c, job_id))

    async def spec(self, job_id: str) -> tuple[str, tuple[str, ...], bool] | None:
        row = await self._db.statement(
            lambda c: one(
                c, "select url, events, results from batch_webhook where job_id = %s", (job_id,)
            )
        )
        return None if row is None else rules.spec(*row)

    async def redeliver(self, job_id: str, now: float) -> int | None:
        return await self._db.transaction(lambda c: redeliver(c, job_id, now))

    async def next_due(self) -> float | None:
        row = await self._db.statement(
            lambda c: one(
                c, "select min(next_try) from webhook_outbox where state = %s", (rules.PENDING,)
            )
        )
        return row[0]
