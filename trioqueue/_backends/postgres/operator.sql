-- The operator's named queries (docs/dashboard.rst, "Controls", "Audit log", "Table health"):
-- bulk retry and delete in bounded batches, schedules switched off and run by hand, the
-- audit log, and the store's sizes. Read with queries.sql (sql.py); the same placeholders.
--
-- The bulk statements take one batch each: at most $n rows, the first ones by id after a
-- cursor ($1, the last id the previous batch picked), locked FOR UPDATE SKIP LOCKED, so no
-- statement holds many row locks or waits behind a worker's statement. The caller loops
-- with the cursor moved on, so one call visits each job once: a job retried by a batch that
-- fails again meanwhile is behind the cursor, not retried twice.
--
-- Their filters are those of list_jobs (job_lists.py: queue $2, state $3, search pattern $4 escaped as
-- there, cancellations $6: docs/protocol.rst §14).

-- name: retry_matching
-- Put the picked failed jobs back, as `retry` does one: attempts and last_error stay,
-- max_attempts grows when used up, a cancel flag is cleared. Of failed jobs sharing a
-- dedup key, only one may be unfinished: the first by id is retried when no unfinished job
-- holds the key, the others are left failed (the unique index would refuse them).
-- The dead-letter filters (docs/protocol.rst §19) narrow it further: $7 a pattern of
-- last_error alone, $8 the error type of the job's last attempt (its attempt row of the
-- highest claim_seq, by the attempts' primary key; '': none recorded), $9 and $10 a range of finished_at.
-- Returns how many rows were picked, the last picked id, and how many were retried.
WITH picked AS (
    SELECT j.id, j.queue, j.dedup_key FROM {schema}.jobs AS j
    WHERE j.id > $1::bigint AND j.status = 'failed'
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND ($3::text IS NULL
           OR {schema}.job_state(j.status, j.not_visible_until, now()) = $3::text)
      AND ($4::text IS NULL
           OR j.payload::text ILIKE $4::text ESCAPE '\'
           OR j.last_error ILIKE $4::text ESCAPE '\')
      AND ($6::boolean IS NULL OR j.cancelled = $6::boolean)
      AND ($7::text IS NULL OR j.last_error ILIKE $7::text ESCAPE '\')
      AND ($8::text IS NULL
           OR coalesce((SELECT a.error_type FROM {schema}.attempts AS a
                        WHERE a.job_id = j.id ORDER BY a.claim_seq DESC LIMIT 1), '')
              = $8::text)
      AND ($9::timestamptz IS NULL OR j.finished_at >= $9::timestamptz)
      AND ($10::timestamptz IS NULL OR j.finished_at < $10::timestamptz)
    ORDER BY j.id
    LIMIT $5::bigint
    FOR UPDATE OF j SKIP LOCKED
),
eligible AS (
    SELECT p.id FROM picked AS p
    WHERE p.dedup_key IS NULL
       OR (p.id = (SELECT min(q.id) FROM picked AS q
                   WHERE q.queue = p.queue AND q.dedup_key = p.dedup_key)
           AND NOT EXISTS (
               SELECT FROM {schema}.jobs AS o
               WHERE o.queue = p.queue AND o.dedup_key = p.dedup_key
                 AND o.status IN ('queued', 'running')))
),
retried AS (
    UPDATE {schema}.jobs AS j
    SET status = 'queued', finished_at = NULL, cancel_requested_at = NULL,
        cancel_acknowledged_at = NULL, worker_id = NULL, awaited = false, cancelled = false,
        not_visible_until = now(), max_attempts = greatest(j.max_attempts, j.attempts + 1)
    FROM eligible AS e
    WHERE j.id = e.id
    RETURNING j.queue
),
notified AS (
    SELECT pg_notify({channel}, 'a:' || q.queue) FROM (SELECT DISTINCT queue FROM retried) AS q
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM retried) AS done,
       (SELECT count(*) FROM notified) AS notices;

-- name: delete_matching
-- Delete the picked jobs, as `delete_job` deletes one: never one running under a live
-- lease (a lapsed lease's row may go). A waiter of a deleted job hears of it (f:).
WITH picked AS (
    SELECT j.id FROM {schema}.jobs AS j
    WHERE j.id > $1::bigint
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND ($3::text IS NULL
           OR {schema}.job_state(j.status, j.not_visible_until, now()) = $3::text)
      AND ($4::text IS NULL
           OR j.payload::text ILIKE $4::text ESCAPE '\'
           OR j.last_error ILIKE $4::text ESCAPE '\')
      AND ($6::boolean IS NULL OR j.cancelled = $6::boolean)
    ORDER BY j.id
    LIMIT $5::bigint
    FOR UPDATE OF j SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.jobs AS j
    USING picked AS p
    WHERE j.id = p.id AND NOT (j.status = 'running' AND j.not_visible_until > now())
    RETURNING j.id,
              CASE WHEN j.awaited THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END
                  AS finished
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM deleted) AS done;

-- name: set_schedule_enabled
-- Enable ($2 true) or disable a schedule. Enabling one that was disabled sets its next run
-- to $3, the first tick after the now() read just before on the same connection, but only
-- while its cron and time zone are still $4 and $5 (what that tick was computed from): a
-- schedule replaced meanwhile matches no row, and the caller reads it again.
UPDATE {schema}.schedules AS s
SET enabled = $2::boolean,
    next_run_at = CASE WHEN $2::boolean AND NOT s.enabled THEN $3::text::timestamptz
                       ELSE s.next_run_at END,
    updated_at = now()
WHERE s.name = $1::text AND s.cron = $4::text AND s.timezone = $5::text
RETURNING s.name;

-- name: schedule_clock
-- A schedule's cron and time zone, and the database's now(): what enabling it computes the
-- next tick from.
SELECT s.cron, s.timezone, s.enabled, now() AS now
FROM {schema}.schedules AS s
WHERE s.name = $1::text;

-- name: run_schedule_now
-- One job of the schedule, now, as a tick would enqueue it, but standing for no tick
-- (schedule_tick NULL: the unique index on ticks does not hold it, so it may run again);
-- next_run_at stays, last_run_at says a job was enqueued. Disabled or not.
WITH ran AS (
    UPDATE {schema}.schedules AS s
    SET last_run_at = now()
    WHERE s.name = $1::text
    RETURNING s.name, s.queue, s.payload, s.priority, s.max_attempts
),
inserted AS (
    INSERT INTO {schema}.jobs
        (queue, payload, priority, max_attempts, not_visible_until, schedule_name)
    SELECT r.queue, r.payload, r.priority, r.max_attempts, now(), r.name
    FROM ran AS r
    RETURNING id, queue
),
notified AS (
    SELECT pg_notify({channel}, 'a:' || i.queue) FROM inserted AS i
)
SELECT i.id FROM inserted AS i, (SELECT count(*) FROM notified) AS n;

-- name: record_audit
INSERT INTO {schema}.audit_log (action, target, session, detail)
VALUES ($1::text, $2::text, $3::text, $4::text::jsonb)
RETURNING id;

-- name: list_audit
-- Newest first; $3, when not NULL, keeps one action (the index on (action, id) serves it).
SELECT a.id, a.at, a.action, a.target, a.session, a.detail::text AS detail
FROM {schema}.audit_log AS a
WHERE $3::text IS NULL OR a.action = $3::text
ORDER BY a.id DESC
LIMIT $1::bigint OFFSET $2::bigint;

-- name: table_sizes
-- Every table and index of the schema ($1: its name, unquoted): its size on disk with its
-- indexes and TOAST (pg_total_relation_size; for an index, its own size), and for a table
-- the statistics collector's live and dead row estimates and last automatic vacuum and
-- analyze. Catalog reads only: no row of a trioqueue table is scanned.
-- The statistics are read per table by the functions pg_stat_user_tables is made of: the
-- view computes its columns for every table of the database before the join keeps the
-- schema's (half a second in a database of many schemas).
SELECT c.relname AS name, c.relkind = 'i' AS is_index,
       CASE WHEN c.relkind = 'i' THEN pg_relation_size(c.oid)
            ELSE pg_total_relation_size(c.oid) END AS total_bytes,
       CASE WHEN c.relkind <> 'i' THEN pg_catalog.pg_stat_get_live_tuples(c.oid) END
           AS live_rows,
       CASE WHEN c.relkind <> 'i' THEN pg_catalog.pg_stat_get_dead_tuples(c.oid) END
           AS dead_rows,
       CASE WHEN c.relkind <> 'i' THEN pg_catalog.pg_stat_get_last_autovacuum_time(c.oid) END
           AS last_autovacuum,
       CASE WHEN c.relkind <> 'i' THEN pg_catalog.pg_stat_get_last_autoanalyze_time(c.oid) END
           AS last_autoanalyze
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = $1::text AND c.relkind IN ('r', 'p', 'i')
ORDER BY c.relkind = 'i', c.relname;

-- name: oldest_work
-- The job running longest under a live lease, and the job ready longest (since it became
-- visible: not_visible_until), each by the claim path's indexes on their states' rows.
-- Running rows are few (those in flight), so sorting them by claimed_at needs no index.
-- The ready rows' statuses are an OR, not an IN: each arm is the predicate of one partial
-- claim index (a BitmapOr of the two), where an IN matched neither and the planner read
-- the whole table (25 s with 10 million finished rows).
SELECT r.id AS running_id, r.claimed_at AS running_since,
       q.id AS ready_id, q.not_visible_until AS ready_since
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT j.id, j.claimed_at FROM {schema}.jobs AS j
    WHERE j.status = 'running' AND j.not_visible_until > now()
    ORDER BY j.claimed_at, j.id LIMIT 1
) AS r ON true
LEFT JOIN LATERAL (
    SELECT j.id, j.not_visible_until FROM {schema}.jobs AS j
    WHERE (j.status = 'queued' OR j.status = 'running') AND j.not_visible_until <= now()
    ORDER BY j.not_visible_until, j.id LIMIT 1
) AS q ON true;
