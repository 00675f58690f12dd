"""Numbered migrations; `PRAGMA user_version` records the last one applied.

Each entry is applied in its own write transaction together with the version bump. Never edit
an applied migration: append a new one.
"""

MIGRATIONS: list[list[str]] = [
    # 1: batch tables, content cache, digest cache, counters, worker heartbeat.
    [
        """create table batch_job(
            id text primary key,
            caller text not null,
            caller_class text not null,
            idem_key text not null,
            status text not null,
            error text not null default '',
            targets_total integer not null,
            targets_done integer not null default 0,
            created_at real not null,
            lease real not null,
            nbytes integer not null default 0,
            started_at real
        )""",
        "create index batch_job_idem on batch_job(caller, idem_key)",
        "create index batch_job_lease on batch_job(lease)",
        "create index batch_job_status on batch_job(status)",
        """create table batch_target(
            job_id text not null references batch_job(id) on delete cascade,
            idx integer not null,
            url text not null,
            options text not null,
            status text not null,
            result text,
            error text,
            hint text,
            retry_at real,
            busy_since real,
            started_at real,
            primary key (job_id, idx)
        ) without rowid""",
        "create index batch_target_status on batch_target(status)",
        """create table content_cache(
            caller_class text not null,
            url text not null,
            final_url text not null,
            status integer not null,
            content_type text not null,
            body blob not null,
            nbytes integer not null,
            fetched_at real not null,
            used_at real not null,
            primary key (caller_class, url)
        ) without rowid""",
        "create index content_cache_used on content_cache(used_at)",
        """create table digest_cache(
            caller_class text not null,
            key text not null,
            value text not null,
            created_at real not null,
            primary key (caller_class, key)
        ) without rowid""",
        """create table counter(
            name text not null,
            label text not null,
            value real not null,
            primary key (name, label)
        ) without rowid""",
        """create table worker_state(
            id integer primary key check (id = 1),
            pid integer not null,
            started_at real not null,
            heartbeat real not null
        )""",
    ],
    # 2: large values last, in rowid tables. SQLite stores a row's columns in order and spills
    # a large value into overflow pages; a WITHOUT ROWID table (or a column after the value)
    # makes every scan of the small columns walk those pages. Results and bodies go last.
    [
        """create table batch_target_v2(
            job_id text not null references batch_job(id) on delete cascade,
            idx integer not null,
            url text not null,
            options text not null,
            status text not null,
            error text,
            hint text,
            retry_at real,
            busy_since real,
            started_at real,
            result text,
            primary key (job_id, idx)
        )""",
        """insert into batch_target_v2(job_id, idx, url, options, status, error, hint, retry_at,
            busy_since, started_at, result)
           select job_id, idx, url, options, status, error, hint, retry_at, busy_since,
            started_at, result from batch_target""",
        "drop table batch_target",
        "alter table batch_target_v2 rename to batch_target",
        "create index batch_target_status on batch_target(status)",
        "drop table content_cache",
        """create table content_cache(
            caller_class text not null,
            url text not null,
            final_url text not null,
            status integer not null,
            content_type text not null,
            nbytes integer not null,
            fetched_at real not null,
            used_at real not null,
            body blob not null
        )""",
        "create unique index content_cache_key on content_cache(caller_class, url)",
        "create index content_cache_used on content_cache(used_at)",
    ],
    # 3: the digest cache the same way (value last, rowid table), with an index for its
    # expiry and size bound.
    [
        "drop table digest_cache",
        """create table digest_cache(
            caller_class text not null,
            key text not null,
            created_at real not null,
            value text not null
        )""",
        "create unique index digest_cache_key on digest_cache(caller_class, key)",
        "create index digest_cache_created on digest_cache(created_at)",
    ],
    # 4: whether a failed target may succeed later and from when (docs/API.md §Retryable
    # failures), before the result column; robots.txt verdicts per origin and each host's
    # "not before" time for batch fetches, shared by both processes (docs/WORKER.md §Spacing
    # and waits).
    [
        """create table batch_target_v4(
            job_id text not null references batch_job(id) on delete cascade,
            idx integer not null,
            url text not null,
            options text not null,
            status text not null,
            error text,
            hint text,
            retry_at real,
            busy_since real,
            started_at real,
            retryable integer,
            retry_after real,
            result text,
            primary key (job_id, idx)
        )""",
        """insert into batch_target_v4(job_id, idx, url, options, status, error, hint, retry_at,
            busy_since, started_at, retryable, result)
           select job_id, idx, url, options, status, error, hint, retry_at, busy_since,
            started_at, case when status = 'failed' then 0 end, result from batch_target""",
        "drop table batch_target",
        "alter table batch_target_v4 rename to batch_target",
        "create index batch_target_status on batch_target(status)",
        """create table robots_txt(
            origin text primary key,
            fetched_at real not null,
            expires_at real not null,
            status integer not null,
            nbytes integer not null,
            body text not null
        )""",
        "create index robots_txt_fetched on robots_txt(fetched_at)",
        """create table host_pace(
            host text primary key,
            not_before real not null
        )""",
        "create index host_pace_not_before on host_pace(not_before)",
    ],
    # 5: a retry job names the job it retries; a caller's job list reads by caller.
    [
        "alter table batch_job add column retry_of text",
        "create index batch_job_retry_of on batch_job(retry_of) where retry_of is not null",
        "create index batch_job_caller on batch_job(caller, created_at)",
    ],
    # 6: the job event log (docs/API.md §Events): rows appended in the transaction of the
    # change they record, numbered within the job, deleted with it.
    [
        """create table batch_event(
            job_id text not null references batch_job(id) on delete cascade,
            id integer not null,
            kind text not null,
            idx integer,
            at real not null,
            data text not null,
            primary key (job_id, id)
        ) without rowid""",
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
            next_try real,
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
]
