"""What a live job's pending targets wait for, as the store records it (docs/API.md §Waiting
targets): each pending target's retry time and the reason the worker gave when it put the
target back, the batch targets being fetched now (on every job), the number of live jobs, and
the hosts whose next batch fetch must wait, with why. `sift.batch.waits` turns these facts
into each target's `waiting` and the job's `eta`; this module only reads them, in one snapshot.
"""

from __future__ import annotations

from sift.store.db import Database
from sift.store.records import WaitFacts
from sift.store.rules import LIVE_STATUSES, PENDING, RUNNING


class Waits:
    def __init__(self, db: Database):
        self._db = db

    async def facts(self, job_id: str, now: float) -> WaitFacts:
        def read(c) -> WaitFacts:
            pending = {
                idx: (retry_at, reason)
                for idx, retry_at, reason in c.execute(
                    "select t.idx, t.retry_at, w.reason from batch_target t "
                    "left join target_wait w on w.job_id = t.job_id and w.idx = t.idx "
                    "where t.job_id = ? and t.status = ?",
                    (job_id, PENDING),
                )
            }
            running = [
                url
                for (url,) in c.execute("select url from batch_target where status = ?", (RUNNING,))
            ]
            live = c.execute(
                "select count(*) from batch_job where status in (?, ?)", LIVE_STATUSES
            ).fetchone()[0]
            hosts = {
                host: (not_before, reason)
                for host, not_before, reason in c.execute(
                    "select host, not_before, reason from host_pace where not_before > ?", (now,)
                )
            }
            return WaitFacts(pending, running, live, hosts)

        return await self._db.on_reader(read)
