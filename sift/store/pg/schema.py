"""The PostgreSQL engine's numbered migrations; `sift_schema` records the last one applied.

Its own list, not a translation of the SQLite one at run time: the two engines' types and
indexes differ (`bigint` sizes, a `seq` for submit
order where SQLite has its rowid). Each entry is applied in its own transaction together with
the version bump, under a transaction-level advisory lock, so boxes that start together migrate
once. Never edit an applied migration: append a new one (docs/OPERATIONS.md §Running on
several boxes).
"""

from sift.status import LIVE

_LIVE_SQL = ", ".join(f"'{s}'" for s in LIVE)

MIGRATIONS: list[list[str]] = [
    # 1: the batch tables, counters and worker liveness (`worker_lease`, renamed in 5). The
    # content and digest caches stay in each box's own SQLite file (docs/ARCHITECTURE.md §Two
    # engines).
    [
        """create table batch_job(
            id text primary key,
            seq bigserial not null,
            caller text not null,
            caller_class text not null,
            idem_key text not null,
            status text not null,
            error text not null default '',
            targets_total integer not null,
            targets_done integer not null default 0,
            created_at double precision not null,
            lease double precision not null,
            nbytes bigint not null default 0,
            started_at double precision
        )""",
        # At most one live job per (caller, target list) (dropped in 5: `fresh` may add a
        # second; the submit lock keeps concurrent identical submits to one job).
        "create unique index batch_job_idem_live on batch_job(caller, idem_key) "
        f"where status in ({_LIVE_SQL})",
        "create index batch_job_idem on batch_job(caller, idem_key)",
        "create index batch_job_lease on batch_job(lease)",
        f"create index batch_job_live on batch_job(seq) where status in ({_LIVE_SQL})",
        """create table batch_target(
            job_id text not null references batch_job(id) on delete cascade,
            idx integer not null,
            url text not null,
            options text not null,
            status text not null,
            error text,
            hint text,
            retry_at double precision,
            busy_since double precision,
            started_at double precision,
            worker text,
            result text,
            primary key (job_id, idx)
        )""",
        "create index batch_target_running on batch_target(worker) where status = 'running'",
        """create table counter(
            name text not null,
            label text not null,
            value double precision not null,
            primary key (name, label)
        )""",
        """create table worker_lease(
            id text primary key,
            host text not null,
            pid integer not null,
            started_at double precision not null,
            heartbeat double precision not null
        )""",
    ],
    # 2: a retry job names the job it retries; a caller's job list reads by caller.
    [
        "alter table batch_job add column retry_of text",
        "create index batch_job_retry_of on batch_job(retry_of) where retry_of is not null",
        "create index batch_job_caller on batch_job(caller, created_at)",
    ],
    # 3: whether a failed target may succeed later and from when (docs/API.md §Retryable
    # failures); targets failed before this migration are not retryable, as on SQLite.
    [
        "alter table batch_target add column retryable boolean",
        "alter table batch_target add column retry_after double precision",
        "update batch_target set retryable = false where status = 'failed'",
    ],
    # 4: robots.txt verdicts per origin and each host's "not before" time, shared by every
    # box (docs/WORKER.md §Spacing and waits); before this, each box kept its own.
    [
        """create table robots_txt(
            origin text primary key,
            fetched_at double precision not null,
            expires_at double precision not null,
            status integer not null,
            nbytes bigint not null,
            body text not null
        )""",
        "create index robots_txt_fetched on robots_txt(fetched_at)",
        "create index robots_txt_expires on robots_txt(expires_at)",
        """create table host_pace(
            host text primary key,
            not_before double precision not null
        )""",
        "create index host_pace_not_before on host_pace(not_before)",
    ],
    # 5: `fresh` makes a new job even while an identical one is live (docs/API.md §POST
    # /v1/batch), so a list may have two live jobs; the submit lock already serialises creates.
    # A worker's liveness is its heartbeat; "lease" is the job's sliding lease only.
    ["drop index batch_job_idem_live", "alter table worker_lease rename to worker_beat"],
    # 6: the job event log (docs/API.md §Events): rows appended in the transaction of the
    # change they record, numbered within the job, deleted with it.
    [
        """create table batch_event(
            job_id text not null references batch_job(id) on delete cascade,
            id integer not null,
            kind text not null,
            idx integer,
            at double precision not null,
            data text not null,
            primary key (job_id, id)
        )""",
    ],
    # 7: webhooks (docs/API.md §Webhooks): a job's webhook, and the outbox of its deliveries,
    # one row per event it asked for, added in the transaction that stores the event.
    [
        """create table batch_webhook(
            job_id text primary key references batch_job(id) on delete cascade,
            url text not null,
            events text not null,
            results integer not null default 0
        )""",
        """create table webhook_outbox(
            job_id text not null references batch_job(id) on delete cascade,
            event_id integer not null,
            state text not null,
            attempts integer not null default 0,
            next_try double precision,
            last_status integer,
            primary key (job_id, event_id)
        )""",
        "create index webhook_outbox_due on webhook_outbox(next_try) where state = 'pending'",
    ],
    # 8: why a pending target waits (docs/API.md §Waiting targets): the reason the worker gave
    # when it put the target back (a table of its own: batch_target keeps its large result
    # last), and the reason of a host's not-before time.
    [
        """create table target_wait(
            job_id text not null,
            idx integer not null,
            reason text not null,
            primary key (job_id, idx),
            foreign key (job_id, idx) references batch_target(job_id, idx) on delete cascade
        )""",
        "alter table host_pace add column reason text",
    ],
    # 9: a stored result is compressed with lz4 where the server was built with it (PostgreSQL
    # 14 and later): less of the server's time in every finish (docs/BENCHMARKS.md §PostgreSQL
    # drain: round trips and compression). Elsewhere the default (pglz) stays. Only values
    # written from now on.
    [
        """do $$ begin
            alter table batch_target alter column result set compression lz4;
        exception when feature_not_supported or syntax_error then null;
        end $$""",
    ],
]
