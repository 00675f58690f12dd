"""Webhook deliveries on SQLite: the job's webhook (stored by the submit), the outbox (rows
added with their events, `sift.store.events`), and the sender's operations on it (docs/API.md
§Webhooks). What each answer does is `sift.store.webhook_rules`' decision."""

from __future__ import annotations

import apsw

from sift.store import counters, series
from sift.store import webhook_rules as rules
from sift.store.db import Database
from sift.store.webhook_rules import Delivery

_TAKE = (
    "select o.job_id, o.event_id, o.attempts, w.url, e.kind, e.at, e.data, j.caller, "
    "j.caller_class, case when w.results and e.kind = 'target.done' "
    f"and length(cast(t.result as blob)) <= {rules.RESULT_MAX} then t.result end, "
    "case when w.results and e.kind = 'target.done' then length(cast(t.result as blob)) end "
    "from webhook_outbox o join batch_webhook w on w.job_id = o.job_id "
    "join batch_event e on e.job_id = o.job_id and e.id = o.event_id "
    "join batch_job j on j.id = o.job_id "
    "left join batch_target t on t.job_id = e.job_id and t.idx = e.idx "
)


def set_webhook(cur: apsw.Cursor, job_id: str, url: str, kinds, results: bool = False) -> None:
    """Inside the submit's transaction: the new job's webhook."""
    cur.execute(
        "insert into batch_webhook(job_id, url, events, results) values (?, ?, ?, ?)",
        (job_id, url, rules.stored(kinds), int(results)),
    )


def take(cur: apsw.Cursor, now: float, limit: int, lease: float) -> list[Delivery]:
    """Due deliveries, oldest first, each leased for `lease` seconds so no other sender takes
    it meanwhile (a sender that dies leaves it due again)."""
    found = [
        Delivery(*r[:-1], r[-1] or 0)
        for r in cur.execute(
            _TAKE + "where o.state = ? and o.next_try <= ? order by o.next_try limit ?",
            (rules.PENDING, now, limit),
        )
    ]
    cur.executemany(
        "update webhook_outbox set next_try = ? where job_id = ? and event_id = ?",
        [(now + lease, d.job_id, d.event_id) for d in found],
    )
    return found


def record(
    cur: apsw.Cursor,
    job_id: str,
    event_id: int,
    *,
    status: int,
    outcome: str,
    retry_at: float | None,
) -> bool:
    """One try's answer: `retry_at` is when to try again (None: this was the last try)."""
    outcome, state, next_try = rules.recorded(outcome, retry_at)
    cur.execute(
        "update webhook_outbox set state = ?, attempts = attempts + 1, last_status = ?, "
        "next_try = ? where job_id = ? and event_id = ? and state = ?",
        (state, status, next_try, job_id, event_id, rules.PENDING),
    )
    if not cur.getconnection().changes():
        return False
    counters.bump(cur, series.WEBHOOK_DELIVERIES, outcome)
    return True


def state(cur: apsw.Cursor, job_id: str) -> dict | None:
    return rules.summary(
        cur.execute(
            "select event_id, state, attempts, last_status, next_try from webhook_outbox "
            "where job_id = ?",
            (job_id,),
        ).fetchall()
    )


def has_webhook(cur: apsw.Cursor, job_id: str) -> bool:
    return (
        cur.execute("select 1 from batch_webhook where job_id = ?", (job_id,)).fetchone()
        is not None
    )


def redeliver(cur: apsw.Cursor, job_id: str, now: float) -> int:
    """Every failed delivery goes out again (tries counted afresh, the same ids); with none
    failed, the last one does. How many."""
    cur.execute(
        "update webhook_outbox set state = ?, attempts = 0, next_try = ? "
        "where job_id = ? and state = ?",
        (rules.PENDING, now, job_id, rules.FAILED),
    )
    n = cur.getconnection().changes()
    if n == 0:
        cur.execute(
            "update webhook_outbox set state = ?, attempts = 0, next_try = ? "
            "where job_id = ? and state = ? and event_id = "
            "(select max(event_id) from webhook_outbox where job_id = ?)",
            (rules.PENDING, now, job_id, rules.DELIVERED, job_id),
        )
        n = cur.getconnection().changes()
    return n


def next_due(cur: apsw.Cursor) -> float | None:
    return cur.execute(
        "select min(next_try) from webhook_outbox where state = ?", (rules.PENDING,)
    ).fetchone()[0]


class Webhooks:
    """The store's `webhooks` part (docs/ARCHITECTURE.md §The store's surface)."""

    def __init__(self, db: Database):
        self._db = db

    async def take(self, now: float, *, limit: int = 16, lease: float = rules.LEASE):
        return await self._db.on_writer(lambda c: take(c, now, limit, lease))

    async def record(
        self, job_id: str, event_id: int, *, status: int, outcome: str, retry_at: float | None
    ) -> bool:
        """`status=`, `outcome=`, `retry_at=`: one try's answer, counted."""
        return await self._db.on_writer(
            lambda c: record(c, job_id, event_id, status=status, outcome=outcome, retry_at=retry_at)
        )

    async def state(self, job_id: str) -> dict | None:
        return await self._db.on_reader(lambda c: state(c, job_id))

    async def spec(self, job_id: str) -> tuple[str, tuple[str, ...], bool] | None:
        def run(c):
            row = c.execute(
                "select url, events, results from batch_webhook where job_id = ?", (job_id,)
            ).fetchone()
            return None if row is None else rules.spec(*row)

        return await self._db.on_reader(run)

    async def redeliver(self, job_id: str, now: float) -> int | None:
        """None: the job has no webhook."""

        def run(c):
            return redeliver(c, job_id, now) if has_webhook(c, job_id) else None

        return await self._db.on_writer(run)

    async def next_due(self) -> float | None:
        return await self._db.on_reader(next_due)
