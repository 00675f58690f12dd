"""`sift.store.waits` in this engine's dialect: the same facts, read in one transaction from
the shared database, so every API box explains a wait the same way."""

from __future__ import annotations

from sift.store.pg.db import PgDatabase, one, rows
from sift.store.records import WaitFacts
from sift.store.rules import LIVE_STATUSES, PENDING, RUNNING


class PgWaits:
    def __init__(self, db: PgDatabase):
        self._db = db

    async def facts(self, job_id: str, now: float) -> WaitFacts:
        async def read(c) -> WaitFacts:
            pending = {
                idx: (retry_at, reason)
                for idx, retry_at, reason in await rows(
                    c,
                    "select t.idx, t.retry_at, w.reason from batch_target t "
                    "left join target_wait w on w.job_id = t.job_id and w.idx = t.idx "
                    "where t.job_id = %s and t.status = %s",
                    (job_id, PENDING),
                )
            }
            running = [
                url
                for (url,) in await rows(
                    c, "select url from batch_target where status = %s", (RUNNING,)
                )
            ]
            live = await one(
                c, "select count(*) from batch_job where status = any(%s)", (list(LIVE_STATUSES),)
            )
            hosts = {
                host: (not_before, reason)
                for host, not_before, reason in await rows(
                    c,
                    "select host, not_before, reason from host_pace where not_before > %s",
                    (now,),
                )
            }
            return WaitFacts(pending, running, int(live[0]) if live else 0, hosts)

        return await self._db.transaction(read)
