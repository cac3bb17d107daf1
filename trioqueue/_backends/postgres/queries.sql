-- The named queries of the PostgreSQL backend, parsed at import: each query starts at a
-- `-- name: <name>` line and runs to the next one. Before use, {schema} is replaced by the
-- quoted, validated schema name and {channel} by the schema's NOTIFY channel as a string
-- literal. Parameters are positional ($1, ...) and always cast, so that asyncpg's encoding
-- never depends on a guess. Arrays travel as text[] and are cast in SQL: asyncpg knows
-- text[] without asking, while any other array type costs a catalog query per connection.
--
-- Notices are kept small and unambiguous (the queue is always last, so it may contain ':'):
--   a:<queue>                             new work on <queue>
--   c:<job_id>:<md5(worker_id)>:<queue>   cancel requested for a job leased by that worker
--   f:<job_id>:<queue>                    a job someone waits for (wait_for) finished or was
--                                         deleted; sent only for rows with `awaited`, so
--                                         finishes nobody waits for take no notify lock
--
-- Every write about an attempt is fenced: it names (id, claim_seq) and applies only while
-- the row is 'running' with that claim_seq (docs/protocol.rst §1, invariant I9).

-- name: migrate_lock
-- Serialises concurrent migrators of one schema until their transaction ends.
SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0));

-- name: migrate_prepare
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_migrations
SELECT version, name, checksum FROM {schema}.schema_migrations ORDER BY version;

-- name: record_migration
INSERT INTO {schema}.schema_migrations (version, name, checksum) VALUES ($1::integer, $2::text, $3::text);

-- name: enqueue
-- Insert every payload in order (so ids ascend with the list), skipping a row whose
-- dedup_key an unfinished job of the queue already holds. One notice if anything was added.
-- $8 is the trace context active at the enqueue (JSON text, or NULL): docs/protocol.rst §14.
WITH inserted AS (
    INSERT INTO {schema}.jobs (queue, payload, priority, max_attempts, not_visible_until, dedup_key,
                               group_key, trace_context)
    SELECT $1::text, p.payload::jsonb, $3::integer, $4::integer,
           now() + make_interval(secs => $5::float8), $6::text, $7::text, $8::text::jsonb
    FROM unnest($2::text[]) WITH ORDINALITY AS p (payload, n)
    ORDER BY p.n
    ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL AND status IN ('queued', 'running')
    DO NOTHING
    RETURNING id
),
notified AS (
    SELECT pg_notify({channel}, 'a:' || $1::text) WHERE EXISTS (SELECT FROM inserted)
)
SELECT i.id FROM inserted AS i, (SELECT count(*) FROM notified) AS n
ORDER BY i.id;

-- name: enqueue_after
-- enqueue with dependencies (docs/protocol.rst §21): $1..$4 as enqueue's, $5 the group,
-- $6 the trace context (a delay and a dedup key are refused with depends_on), $7 the
-- dependencies' ids (distinct), $8 the policy ('fail' or 'cancel'), $9 the parent's id
-- (NULL for none: docs/protocol.rst §22), locked with them and required unfinished.
-- Every dependency's row is locked first, in id order, waiting for a statement finishing
-- it; the lock reads its latest version, so a success committed meanwhile counts as met,
-- and a success after this commits fires its trigger after this lock is released, and so
-- sees the edges (migration 0018). No row when an id names no job, or the parent is
-- missing or finished: nothing is written.
-- A dependency failed for good finishes the new jobs at once, by their policy (no
-- attempt row). One notice when the new jobs are claimable at once.
WITH locked AS (
    SELECT d.id, d.status, d.id IS NOT DISTINCT FROM $9::bigint AS is_parent
    FROM {schema}.jobs AS d
    WHERE d.id = ANY($7::text[]::bigint[]) OR d.id = $9::bigint
    ORDER BY d.id
    FOR NO KEY UPDATE
),
summary AS (
    SELECT count(*) FILTER (WHERE NOT l.is_parent) = cardinality($7::text[])
               AND ($9::bigint IS NULL OR coalesce(
                   bool_or(l.is_parent AND l.status IN ('queued', 'running')), false))
               AS complete,
           count(*) FILTER (WHERE NOT l.is_parent AND l.status IN ('queued', 'running'))
               AS unmet,
           min(l.id) FILTER (WHERE NOT l.is_parent AND l.status = 'failed') AS failed
    FROM locked AS l
),
marked AS (
    UPDATE {schema}.jobs AS d SET has_dependents = true
    FROM locked AS l, summary AS s
    WHERE d.id = l.id AND NOT l.is_parent AND s.complete AND NOT d.has_dependents
),
inserted AS (
    INSERT INTO {schema}.jobs (queue, payload, priority, max_attempts, not_visible_until,
                               group_key, trace_context, waiting, dependency_failure, status,
                               finished_at, last_error, cancelled, parent_id)
    SELECT $1::text, p.payload::jsonb, $3::integer, $4::integer,
           CASE WHEN s.failed IS NULL AND s.unmet > 0 THEN 'infinity'::timestamptz ELSE now() END,
           $5::text, $6::text::jsonb,
           CASE WHEN s.failed IS NULL THEN s.unmet ELSE 0 END, $8::text,
           CASE WHEN s.failed IS NULL THEN 'queued' ELSE 'failed' END,
           CASE WHEN s.failed IS NOT NULL THEN now() END,
           CASE WHEN s.failed IS NOT NULL
                THEN CASE WHEN $8::text = 'cancel' THEN 'cancelled: ' ELSE '' END
                     || 'dependency ' || s.failed || ' failed' END,
           s.failed IS NOT NULL AND $8::text = 'cancel', $9::bigint
    FROM unnest($2::text[]) WITH ORDINALITY AS p (payload, n), summary AS s
    WHERE s.complete
    ORDER BY p.n
    RETURNING id, status
),
edges AS (
    INSERT INTO {schema}.job_edges (dependency_id, dependent_id)
    SELECT l.id, i.id FROM locked AS l, inserted AS i WHERE NOT l.is_parent
),
notified AS (
    SELECT pg_notify({channel}, 'a:' || $1::text)
    FROM summary AS s
    WHERE s.unmet = 0 AND EXISTS (SELECT FROM inserted AS i WHERE i.status = 'queued')
)
SELECT i.id FROM inserted AS i, (SELECT count(*) FROM notified) AS n
ORDER BY i.id;

-- name: unknown_jobs
-- Which of the ids $1 name no job (the message of an enqueue_after that found no row).
SELECT w.id FROM unnest($1::text[]::bigint[]) AS w (id)
WHERE NOT EXISTS (SELECT FROM {schema}.jobs AS j WHERE j.id = w.id)
ORDER BY w.id;

-- name: job_dependencies
-- A job's dependencies ('dependency') and dependents ('dependent'), each with its queue
-- and state, by id, and its parent and children (docs/protocol.rst §22); an edge to a job
-- that is gone is left out. No row at all (not even the
-- job's own) when the job is unknown: the first row says the job exists.
SELECT 'self' AS side, j.id, j.queue, {schema}.job_state(j.status, j.not_visible_until, now()) AS state
FROM {schema}.jobs AS j WHERE j.id = $1::bigint
UNION ALL
SELECT 'dependency', d.id, d.queue, {schema}.job_state(d.status, d.not_visible_until, now())
FROM {schema}.job_edges AS e JOIN {schema}.jobs AS d ON d.id = e.dependency_id
WHERE e.dependent_id = $1::bigint
UNION ALL
SELECT 'dependent', d.id, d.queue, {schema}.job_state(d.status, d.not_visible_until, now())
FROM {schema}.job_edges AS e JOIN {schema}.jobs AS d ON d.id = e.dependent_id
WHERE e.dependency_id = $1::bigint
UNION ALL
SELECT 'parent', p.id, p.queue, {schema}.job_state(p.status, p.not_visible_until, now())
FROM {schema}.jobs AS j JOIN {schema}.jobs AS p ON p.id = j.parent_id
WHERE j.id = $1::bigint
UNION ALL
SELECT 'child', c.id, c.queue, {schema}.job_state(c.status, c.not_visible_until, now())
FROM {schema}.jobs AS c
WHERE c.parent_id = $1::bigint
ORDER BY 1 DESC, 2;

-- name: find_dedup
SELECT id FROM {schema}.jobs
WHERE queue = $1::text AND dedup_key = $2::text AND status IN ('queued', 'running');

-- name: revise_duplicate
-- on_duplicate (docs/protocol.rst §18): after `enqueue` found dedup key $2 of queue $1
-- held, change the holder if it waits. $3 is the policy: 'replace' sets payload $4,
-- priority $5 and run time now() + $6 s; 'debounce' sets the run time alone. The holder is
-- locked first, waiting for a lock (no SKIP LOCKED): a claim taking the row at the same
-- moment makes this wait for it, and then the row's new version is read, so a claim that
-- took it first wins and the holder comes back 'running', unchanged. Once this holds the
-- lock, every claim skips the row (SKIP LOCKED) until this commits. No row: the holder
-- finished meanwhile (the caller inserts again). One notice when the holder changed.
WITH holder AS (
    SELECT h.id, h.status FROM {schema}.jobs AS h
    WHERE h.queue = $1::text AND h.dedup_key = $2::text AND h.status IN ('queued', 'running')
    FOR UPDATE
),
revised AS (
    UPDATE {schema}.jobs AS j
    SET payload = CASE WHEN $3::text = 'replace' THEN $4::text::jsonb ELSE j.payload END,
        priority = CASE WHEN $3::text = 'replace' THEN $5::integer ELSE j.priority END,
        not_visible_until = now() + make_interval(secs => $6::float8)
    FROM holder AS h
    WHERE j.id = h.id AND h.status = 'queued'
    RETURNING j.id
),
notified AS (
    SELECT pg_notify({channel}, 'a:' || $1::text) WHERE EXISTS (SELECT FROM revised)
)
SELECT h.id, EXISTS (SELECT FROM revised) AS changed
FROM holder AS h, (SELECT count(*) FROM notified) AS n;

-- name: cancel
-- A leased job gets the cancel flag (its worker learns of it from its next renewal, which
-- the notice makes happen now); any other unfinished job fails at once. So does every
-- unfinished descendant of it (docs/protocol.rst §22: children by parent_id, theirs, and
-- so on, found through jobs_parent_idx), each as a cancel of it alone, a failed one
-- naming the job cancelled; nothing of them when the job itself is not unfinished.
WITH RECURSIVE tree (id, depth) AS (
    SELECT j.id, 0 FROM {schema}.jobs AS j
    WHERE j.id = $1::bigint AND j.status IN ('queued', 'running')
    UNION ALL
    SELECT c.id, t.depth + 1
    FROM tree AS t JOIN {schema}.jobs AS c ON c.parent_id = t.id
    WHERE t.depth < 100000
),
cancelled AS (
    UPDATE {schema}.jobs AS j
    SET cancel_requested_at = CASE
            WHEN j.status = 'running' AND j.not_visible_until > now()
            THEN coalesce(j.cancel_requested_at, now())
            ELSE j.cancel_requested_at
        END,
        status = CASE
            WHEN j.status = 'running' AND j.not_visible_until > now() THEN 'running'
            ELSE 'failed'
        END,
        finished_at = CASE
            WHEN j.status = 'running' AND j.not_visible_until > now() THEN NULL
            ELSE now()
        END,
        last_error = CASE
            WHEN j.status = 'running' AND j.not_visible_until > now() THEN j.last_error
            WHEN j.id <> $1::bigint THEN 'cancelled: parent ' || $1::bigint || ' cancelled'
            WHEN j.status = 'running' THEN 'cancelled: cancel requested after its lease expired'
            WHEN j.attempts = 0 THEN 'cancelled before it ran'
            ELSE 'cancelled while waiting to retry'
        END,
        -- Failed here, it is a cancellation (docs/protocol.rst §14); no attempt row.
        cancelled = NOT (j.status = 'running' AND j.not_visible_until > now())
    FROM tree AS t
    WHERE j.id = t.id AND j.status IN ('queued', 'running')
    -- A job failed here tells its waiters (the f: notice goes out in the RETURNING, which
    -- PostgreSQL evaluates for every updated row whatever the outer query reads).
    RETURNING j.id, j.queue, j.worker_id, j.status,
              CASE WHEN j.awaited AND j.status = 'failed'
                   THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END AS finished
),
notified AS (
    SELECT count(pg_notify({channel}, 'c:' || c.id || ':' || md5(coalesce(c.worker_id, ''))
                                      || ':' || c.queue)) AS n
    FROM cancelled AS c WHERE c.status = 'running'
)
SELECT c.status, (SELECT n.n FROM notified AS n) AS notices
FROM cancelled AS c
WHERE c.id = $1::bigint;

-- name: retry
-- A failed job goes back to its queue for one more attempt: attempts and last_error stay,
-- max_attempts grows when it was used up, a cancel flag is cleared. No row (refused) when
-- another unfinished job of the queue holds its dedup key.
WITH retried AS (
    UPDATE {schema}.jobs AS j
    SET status = 'queued', finished_at = NULL, cancel_requested_at = NULL,
        cancel_acknowledged_at = NULL, worker_id = NULL, awaited = false, cancelled = false,
        not_visible_until = now(), max_attempts = greatest(j.max_attempts, j.attempts + 1)
    WHERE j.id = $1::bigint AND j.status = 'failed'
      AND (j.dedup_key IS NULL OR NOT EXISTS (
          SELECT FROM {schema}.jobs AS o
          WHERE o.queue = j.queue AND o.dedup_key = j.dedup_key
            AND o.status IN ('queued', 'running')))
    RETURNING j.queue
)
SELECT count(pg_notify({channel}, 'a:' || r.queue)) FROM retried AS r;

-- name: get_job
SELECT j.id, j.queue, j.payload::text AS payload,
       {schema}.job_state(j.status, j.not_visible_until, now()) AS state,
       j.attempts, j.max_attempts, j.priority, j.progress, j.last_error,
       j.created_at, j.finished_at, j.not_visible_until, j.last_renewed_at,
       j.cancel_requested_at, j.cancel_acknowledged_at, j.worker_id, j.result::text AS result,
       j.awaited, j.group_key, j.cancelled, j.checkpoint::text AS checkpoint, j.checkpointed_at,
       j.snoozes, j.parent_id,
       -- The dependencies a waiting job still waits for (docs/protocol.rst §21).
       CASE WHEN j.waiting > 0 AND j.status = 'queued' THEN ARRAY(
           SELECT d.id FROM {schema}.job_edges AS e JOIN {schema}.jobs AS d ON d.id = e.dependency_id
           WHERE e.dependent_id = j.id AND d.status <> 'succeeded' ORDER BY d.id) END AS waiting_on
FROM {schema}.jobs AS j
WHERE j.id = $1::bigint;

-- name: get_jobs
-- get_job's row for each of many ids in one statement (the dashboard's event streams read
-- every job they follow with it, once per tick for all clients). Unknown ids find no row.
-- $2, when not NULL, cuts the long texts as list_jobs' preview does (job_lists.py).
SELECT j.id, j.queue, j.group_key,
       {schema}.job_state(j.status, j.not_visible_until, now()) AS state,
       j.attempts, j.max_attempts, j.priority, j.progress,
       j.created_at, j.finished_at, j.not_visible_until, j.last_renewed_at,
       j.cancel_requested_at, j.cancel_acknowledged_at, j.worker_id, j.cancelled, j.snoozes,
       CASE WHEN $2::int IS NULL THEN j.payload::text ELSE left(j.payload::text, $2::int) END
           AS payload,
       CASE WHEN $2::int IS NOT NULL THEN length(j.payload::text) END AS payload_length,
       CASE WHEN $2::int IS NULL THEN j.result::text ELSE left(j.result::text, $2::int) END
           AS result,
       CASE WHEN $2::int IS NOT NULL THEN length(j.result::text) END AS result_length,
       CASE WHEN $2::int IS NULL THEN j.last_error ELSE left(j.last_error, $2::int) END
           AS last_error,
       CASE WHEN $2::int IS NOT NULL THEN length(j.last_error) END AS last_error_length
FROM {schema}.jobs AS j
WHERE j.id = ANY($1::bigint[]);

-- name: await_job
-- wait_for's read: get_job's row, after marking an unfinished job awaited (once: a marked
-- row is not written again), so that the statements finishing it send f:. The waiter
-- LISTENs before this runs, so a finish after it is heard. The row is marked only if its
-- lock can be had at once (SKIP LOCKED): a waiter never queues behind a row lock (an
-- ack's, or a stuck statement's). No row when the job is finished, unknown, marked
-- already or locked: the caller then reads it with get_job, and when that finds it
-- unfinished and unmarked (it was locked), tries again soon.
WITH locked AS (
    SELECT l.id FROM {schema}.jobs AS l
    WHERE l.id = $1::bigint AND l.status IN ('queued', 'running') AND NOT l.awaited
    FOR UPDATE SKIP LOCKED
)
UPDATE {schema}.jobs AS j
SET awaited = true
FROM locked AS l
WHERE j.id = l.id
RETURNING j.id, j.queue, j.payload::text AS payload,
          {schema}.job_state(j.status, j.not_visible_until, now()) AS state,
          j.attempts, j.max_attempts, j.priority, j.progress, j.last_error,
          j.created_at, j.finished_at, j.not_visible_until, j.last_renewed_at,
          j.cancel_requested_at, j.cancel_acknowledged_at, j.worker_id, j.result::text AS result,
          j.group_key, j.cancelled, j.checkpoint::text AS checkpoint, j.checkpointed_at,
          j.snoozes;

-- name: delete_job
-- Any job but one running under a live lease. A claim racing with it holds the row's lock:
-- the delete waits, then re-checks the row it claimed, and leaves it.
-- A waiter of the deleted job hears of it (f:) and finds it gone.
WITH deleted AS (
    DELETE FROM {schema}.jobs AS j
    WHERE j.id = $1::bigint AND NOT (j.status = 'running' AND j.not_visible_until > now())
    RETURNING j.id,
              CASE WHEN j.awaited THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END
                  AS finished
)
SELECT d.id FROM deleted AS d;

-- name: finished_history
-- Jobs finished per bucket of $1/$2 seconds over the $1 seconds before now(), every bucket
-- present (generate_series), oldest first. The range scan uses jobs_finished_idx. A row
-- finished after this statement's now() (another transaction's clock) counts in the last.
WITH counted AS (
    SELECT least(floor(extract(epoch FROM j.finished_at - (now() - make_interval(secs => $1::float8)))
                       / ($1::float8 / $2::integer))::integer,
                 $2::integer - 1) AS n,
           count(*) FILTER (WHERE j.status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE j.status = 'failed') AS failed
    FROM {schema}.jobs AS j
    WHERE j.finished_at >= now() - make_interval(secs => $1::float8)
      AND ($3::text IS NULL OR j.queue = $3::text)
    GROUP BY 1
)
SELECT g.n,
       now() - make_interval(secs => $1::float8) + make_interval(secs => g.n * ($1::float8 / $2::integer))
           AS start,
       coalesce(c.succeeded, 0) AS succeeded,
       coalesce(c.failed, 0) AS failed
FROM generate_series(0, $2::integer - 1) AS g (n)
LEFT JOIN counted AS c ON c.n = g.n
ORDER BY g.n;

-- name: list_workers
SELECT w.worker_id, w.host, w.pid, w.queue, w.concurrency, w.in_flight, w.abandoned_renewals,
       w.last_beat_at, w.started_at,
       now() - w.last_beat_at > make_interval(secs => 3 * w.heartbeat_interval) AS stale,
       w.clock_skew, w.clock_verdict
FROM {schema}.workers AS w
ORDER BY w.queue, w.started_at, w.worker_id;

-- name: register_pool
-- (Re)start a pool's row; first delete the rows of pools stale for more than an hour
-- (processes long gone whose unregistration was lost).
WITH pruned AS (
    DELETE FROM {schema}.workers AS w
    WHERE w.last_beat_at < now() - make_interval(secs => 3 * w.heartbeat_interval + 3600)
      AND w.worker_id <> $1::text
)
INSERT INTO {schema}.workers AS w (worker_id, host, pid, queue, concurrency, heartbeat_interval)
VALUES ($1::text, $2::text, $3::integer, $4::text, $5::integer, $6::float8)
ON CONFLICT (worker_id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, queue = excluded.queue,
    concurrency = excluded.concurrency, heartbeat_interval = excluded.heartbeat_interval,
    in_flight = 0, abandoned_renewals = 0, started_at = now(), last_beat_at = now(),
    clock_skew = NULL, clock_verdict = NULL;

-- name: unregister_pool
DELETE FROM {schema}.workers AS w WHERE w.worker_id = $1::text RETURNING 1;

-- name: pause_queue
-- The notice lets listeners (the dashboard) see it at once; pools see it at their next claim.
WITH paused AS (
    INSERT INTO {schema}.queues AS q (queue, paused) VALUES ($1::text, true)
    ON CONFLICT (queue) DO UPDATE SET paused = true, updated_at = now()
    RETURNING q.queue
)
SELECT count(pg_notify({channel}, 'a:' || p.queue)) FROM paused AS p;

-- name: resume_queue
-- The notice wakes idle pools at once.
WITH resumed AS (
    UPDATE {schema}.queues AS q SET paused = false, updated_at = now()
    WHERE q.queue = $1::text
)
SELECT pg_notify({channel}, 'a:' || $1::text);

-- name: set_queue_limits
-- Both limits at once (NULL lifts one). A rate starts with a full bucket: one second's worth.
-- The notice lets idle pools claim under a raised limit.
WITH limited AS (
    INSERT INTO {schema}.queues AS q (queue, max_running, max_per_second, tokens, tokens_at)
    VALUES ($1::text, $2::integer, $3::float8, coalesce(greatest(1, $3::float8), 0), now())
    ON CONFLICT (queue) DO UPDATE
    SET max_running = excluded.max_running, max_per_second = excluded.max_per_second,
        tokens = excluded.tokens, tokens_at = excluded.tokens_at, updated_at = now()
    RETURNING q.queue
)
SELECT count(pg_notify({channel}, 'a:' || l.queue)) FROM limited AS l;

-- name: lock_queue
-- The first statement of a claim on a queue with limits: it holds the queue's row until the
-- claim's transaction ends, so that claims of the queue take turns and each one counts
-- what the ones before it took (the claim that follows runs on a fresh snapshot).
-- Answers whether the queue still has limits (no row: it has none).
SELECT q.max_running IS NOT NULL OR q.max_per_second IS NOT NULL
FROM {schema}.queues AS q WHERE q.queue = $1::text FOR UPDATE;

-- name: claim
-- One statement: dead-letter the queue's expired leases that must not run again (a cancel
-- flag, or the final attempt used up), then lease up to $2 claimable rows, priority DESC
-- then id. Waiting rows come from the 'queued' index, expired leases from the 'running'
-- one (a range scan on lease_floor, a lower bound of the lease that renewals seldom move,
-- checked against not_visible_until: migration 0006); each side is locked with SKIP
-- LOCKED, and the best $2 of both are leased.
--
-- Flow control (docs/flow.rst) comes from the queue's row in `queues`, if it has one: a
-- paused queue is left alone. A queue with limits is claimed in two steps: without its
-- lock ($5 false) this statement takes nothing and answers one row with a NULL id and
-- retry_after -1 ("claim again holding the queue's lock"); the backend then runs
-- lock_queue and this statement again ($5 true) in one transaction. With the lock, and a
-- snapshot taken after it, the limits are counted exactly: live leases of the queue for
-- max_running, and the token bucket for max_per_second. When they held rows back, a row
-- with a NULL id says in retry_after when to claim again.
--
-- Groups: a waiting row with a group_key is claimable only as its group's next job (the
-- first of the group's waiting rows, priority DESC then id, delayed ones included) while
-- no row of the group is running. Two claims racing for a group's next job lock the same
-- row, so SKIP LOCKED (or the re-check of a row another claim just took) leaves the group
-- to one of them.
--
-- Attempts without an outcome (docs/protocol.rst §13, migration 0007): an expired lease
-- taken again is an attempt that ended without one; the claim counts it (lapses) and says
-- so in last_error. $6 is quarantine_after (NULL: off): an expired row whose lapses + 1
-- reach it is quarantined, and taken only by a claim made alone ($7: the pool has nothing
-- in flight), by itself (`lone`); any other claim leaves it and answers a row with a NULL
-- id and alone_waiting. A row whose run alone lapsed too is parked by `dead`.
--
-- Attempt history (docs/protocol.rst §14, migration 0009): each row taken gets claimed_at,
-- wait_seconds and its pool's host, and loses the started_at and run_seconds a previous
-- succeeded attempt left; every lapsed attempt, taken over (`claimed`) or dead-lettered
-- (`dead`), gets its 'lost' row in `attempts` (`lost`), under its own claim_seq. The
-- lapsed attempt's worker, host and times are read where its row is locked (`lone`,
-- `expired`), since the update overwrites them.
WITH settings AS (
    SELECT coalesce(bool_or(q.paused), false) AS paused,
           bool_or(q.max_running IS NOT NULL OR q.max_per_second IS NOT NULL) IS TRUE AS limited,
           min(q.max_running) AS max_running, min(q.max_per_second) AS max_per_second,
           -- The bucket now, on the clock of this statement (with the lock: after the wait).
           -- (greatest() and least() skip NULLs, hence the CASE: no rate, no bucket.)
           min(CASE WHEN q.max_per_second IS NOT NULL THEN
               least(greatest(1, q.max_per_second),
                     q.tokens + greatest(0, extract(epoch FROM statement_timestamp() - q.tokens_at))
                                * q.max_per_second) END) AS tokens
    FROM {schema}.queues AS q
    WHERE q.queue = $1::text
),
running AS (
    -- Live leases of the queue: only counted for max_running, with the lock held.
    SELECT count(*) AS n FROM {schema}.jobs AS r, settings AS s
    WHERE s.max_running IS NOT NULL AND $5::boolean
      AND r.queue = $1::text AND r.status = 'running' AND r.not_visible_until > now()
),
allowance AS (
    SELECT CASE
        WHEN s.paused OR (s.limited AND NOT $5::boolean) THEN 0
        ELSE least($2::bigint,
                   CASE WHEN s.max_running IS NOT NULL
                        THEN greatest(0, s.max_running - (SELECT n FROM running)) END,
                   floor(s.tokens)::bigint)  -- (least() skips a NULL: no limit)
    END AS n
    FROM settings AS s
),
dead AS (
    UPDATE {schema}.jobs AS j
    SET status = 'failed',
        finished_at = now(),
        cancelled = j.cancel_requested_at IS NOT NULL,
        last_error = CASE
            WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled: cancel requested'
            WHEN j.alone THEN format(
                'quarantined: attempts %s..%s each ended without an outcome (the last one run alone)',
                j.attempts - j.lapses, j.attempts)
            ELSE format('lease expired on the final attempt (%s of %s): the worker running it '
                        'stopped without recording an outcome', j.max_attempts, j.max_attempts)
        END
    -- = ANY (ARRAY(...)): the locked ids are collected first, then updated by primary key,
    -- whatever the planner guesses about expired leases (finished rows skew its statistics).
    WHERE j.id = ANY (ARRAY(
        SELECT d.id FROM {schema}.jobs AS d
        WHERE d.queue = $1::text AND d.status = 'running' AND d.lease_floor <= now()
          AND d.not_visible_until <= now()
          AND (d.cancel_requested_at IS NOT NULL OR d.attempts >= d.max_attempts OR d.alone)
          AND NOT (SELECT paused FROM settings)
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING j.id, j.queue, j.attempts, j.claim_seq, j.worker_id, j.host, j.claimed_at,
              j.wait_seconds, j.last_error,
              CASE WHEN j.awaited THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END
                  AS finished
),
lone AS (
    -- Alone: the first quarantined row, and then nothing else (`rest` is 0).
    SELECT e.id, e.worker_id AS lapsed_worker, e.host AS lapsed_host,
           e.claimed_at AS lapsed_claimed_at, e.wait_seconds AS lapsed_wait
    FROM {schema}.jobs AS e
    WHERE $7::boolean AND e.queue = $1::text AND e.status = 'running' AND e.lease_floor <= now()
      AND e.not_visible_until <= now()
      AND e.cancel_requested_at IS NULL AND e.attempts < e.max_attempts AND NOT e.alone
      AND e.lapses + 1 >= $6::integer
    ORDER BY e.priority DESC, e.id
    LIMIT least(1, (SELECT n FROM allowance))
    FOR UPDATE SKIP LOCKED
),
rest AS (
    SELECT CASE WHEN EXISTS (SELECT FROM lone) THEN 0 ELSE a.n END AS n FROM allowance AS a
),
waiting AS (
    SELECT w.id, w.priority, false AS lapsed, NULL::text AS lapsed_worker,
           NULL::text AS lapsed_host, NULL::timestamptz AS lapsed_claimed_at,
           NULL::float8 AS lapsed_wait
    FROM {schema}.jobs AS w
    WHERE w.queue = $1::text AND w.status = 'queued' AND w.not_visible_until <= now()
      AND (w.group_key IS NULL OR (
          -- No row of the group running (one this statement dead-letters no longer is)...
          -- (A scalar probe, not NOT EXISTS: the planner may turn that into one hashed
          -- read of every running row; this stays an index probe per grouped candidate.)
          (SELECT g.id FROM {schema}.jobs AS g
           WHERE g.queue = w.queue AND g.group_key = w.group_key AND g.status = 'running'
             AND g.id <> ALL (ARRAY(SELECT id FROM dead))
           LIMIT 1) IS NULL
          -- ...and this row the group's next.
          AND w.id = (
              SELECT h.id FROM {schema}.jobs AS h
              WHERE h.queue = w.queue AND h.group_key = w.group_key AND h.status = 'queued'
              ORDER BY h.priority DESC, h.id
              LIMIT 1)))
    ORDER BY w.priority DESC, w.id
    LIMIT (SELECT n FROM rest)
    FOR UPDATE SKIP LOCKED
),
expired AS (
    SELECT e.id, e.priority, true AS lapsed, e.worker_id AS lapsed_worker,
           e.host AS lapsed_host, e.claimed_at AS lapsed_claimed_at,
           e.wait_seconds AS lapsed_wait
    FROM {schema}.jobs AS e
    WHERE e.queue = $1::text AND e.status = 'running' AND e.lease_floor <= now()
      AND e.not_visible_until <= now()
      AND e.cancel_requested_at IS NULL AND e.attempts < e.max_attempts AND NOT e.alone
      AND ($6::integer IS NULL OR e.lapses + 1 < $6::integer)  -- (quarantined: `lone`)
    ORDER BY e.priority DESC, e.id
    LIMIT (SELECT n FROM rest)
    FOR UPDATE SKIP LOCKED
),
quarantined AS (
    -- Whether a quarantined row is claimable, locks aside, when `lone` took none: the
    -- answer's alone_waiting (the pool then drains and claims alone). Ordered by the
    -- floor, so that the range scan of expired leases serves it (as an EXISTS, the
    -- planner read the whole table: 6 ms against 0.4 ms for the rest of the claim).
    SELECT count(*) > 0 AS waiting FROM (
        SELECT FROM {schema}.jobs AS e
        WHERE $6::integer IS NOT NULL AND NOT EXISTS (SELECT FROM lone)
          AND NOT (SELECT paused FROM settings)
          AND e.queue = $1::text AND e.status = 'running' AND e.lease_floor <= now()
          AND e.not_visible_until <= now()
          AND e.cancel_requested_at IS NULL AND e.attempts < e.max_attempts AND NOT e.alone
          AND e.lapses + 1 >= $6::integer
        ORDER BY e.lease_floor
        LIMIT 1
    ) AS q
),
picked AS (
    SELECT l.id, true AS alone, true AS lapsed, l.lapsed_worker, l.lapsed_host,
           l.lapsed_claimed_at, l.lapsed_wait
    FROM lone AS l
    UNION ALL
    (SELECT c.id, false, c.lapsed, c.lapsed_worker, c.lapsed_host, c.lapsed_claimed_at,
            c.lapsed_wait
     FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) AS c
     ORDER BY c.priority DESC, c.id
     LIMIT (SELECT n FROM rest))
),
claimed AS (
    UPDATE {schema}.jobs AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        claim_seq = j.claim_seq + 1,
        worker_id = $3::text,
        -- A running row's lease lapsed: its last attempt ended without an outcome.
        lapses = CASE WHEN j.status = 'running' THEN j.lapses + 1 ELSE 0 END,
        alone = p.alone,
        last_error = CASE
            WHEN j.status <> 'running' THEN j.last_error
            WHEN p.alone THEN format('the worker running attempt %s stopped without recording '
                                     'an outcome (attempts %s..%s in a row): attempt %s runs alone',
                                     j.attempts, j.attempts - j.lapses, j.attempts, j.attempts + 1)
            ELSE format('the worker running attempt %s stopped without recording an outcome',
                        j.attempts)
        END,
        progress = NULL,  -- the new attempt has reported none; an old attempt's is not its own
        -- The lease counts from the moment the row is locked, not from the statement's
        -- start (now()): a claim that waited on a lock (a LOCK TABLE, say) must not
        -- deliver rows whose lease already ran out (docs/protocol.rst, "Rows, attempts
        -- and fencing"). Which rows are claimable is still decided by now(): a lease
        -- that had run out when the statement began has surely run out by now.
        not_visible_until = clock_timestamp() + make_interval(secs => $4::float8),
        -- At most the lease (now() <= clock_timestamp()): see migration 0006.
        lease_floor = now() + make_interval(secs => $4::float8),
        last_renewed_at = clock_timestamp(),
        -- How long the row had been claimable: from the not_visible_until it had (docs/
        -- protocol.rst §14); not indexed, so a renewal stays HOT (migration 0009).
        claimed_at = clock_timestamp(),
        wait_seconds = greatest(0, extract(epoch FROM clock_timestamp() - j.not_visible_until)),
        -- The new attempt's pool (an InitPlan: one lookup per statement), and no run yet:
        -- the ack writes these two (a succeeded attempt is this row, §14).
        host = (SELECT w.host FROM {schema}.workers AS w WHERE w.worker_id = $3::text),
        started_at = NULL,
        run_seconds = NULL
    FROM picked AS p
    WHERE j.id = p.id
    RETURNING j.id, j.queue, j.payload::text AS payload, j.priority, j.attempts,
              j.max_attempts, j.claim_seq, j.alone, j.wait_seconds::float8 AS waited,
              j.trace_context::text AS trace_context, j.claimed_at, j.last_error,
              j.checkpoint::text AS checkpoint,  -- kept, for this attempt to resume (§16)
              p.lapsed, p.lapsed_worker, p.lapsed_host, p.lapsed_claimed_at, p.lapsed_wait,
              extract(epoch FROM j.not_visible_until)::float8 AS lease_until,
              -- How long after the statement began the lease started, on the database's
              -- own clock (the worker adds it to the local time it sent the claim).
              extract(epoch FROM j.not_visible_until - now())::float8 - $4::float8
                  AS locked_after
),
lost AS (
    -- The lapsed attempts' rows: dead-lettered ones end now, taken-over ones at the
    -- takeover; each names its own claim_seq, so its late write still misses (§14).
    INSERT INTO {schema}.attempts AS a
        (job_id, claim_seq, attempt, queue, outcome, worker_id, host, claimed_at, finished_at,
         wait_seconds, error)
    SELECT x.id, x.claim_seq, x.attempt, x.queue, 'lost', x.worker_id, x.host,
           coalesce(x.claimed_at, x.finished_at), x.finished_at, x.wait_seconds, x.error
    FROM (SELECT d.id, d.claim_seq, d.attempts AS attempt, d.queue, d.worker_id, d.host,
                 d.claimed_at, now() AS finished_at, d.wait_seconds, d.last_error AS error
          FROM dead AS d
          UNION ALL
          SELECT c.id, c.claim_seq - 1, c.attempts - 1, c.queue, c.lapsed_worker, c.lapsed_host,
                 c.lapsed_claimed_at, c.claimed_at, c.lapsed_wait, c.last_error
          FROM claimed AS c WHERE c.lapsed) AS x
    ON CONFLICT (job_id, claim_seq) DO NOTHING
),
spent AS (
    -- With the lock: the bucket loses what was taken (its row is this transaction's).
    UPDATE {schema}.queues AS q
    SET tokens = s.tokens - (SELECT count(*) FROM claimed),
        tokens_at = greatest(q.tokens_at, statement_timestamp())
    FROM settings AS s
    WHERE q.queue = $1::text AND $5::boolean AND q.max_per_second IS NOT NULL
    RETURNING q.tokens
),
held AS (
    -- One row when the limits held claimable rows back: fewer allowed than asked, and all
    -- of those taken. retry_after: until the bucket has a token, or (max_running reached)
    -- the poll of a full queue, 0.5 s; -1 on the first step of a limited claim.
    SELECT CASE
        WHEN NOT $5::boolean THEN -1
        ELSE greatest(
            coalesce((1 - (SELECT tokens FROM spent)) / s.max_per_second, 0),
            CASE WHEN (SELECT n FROM running) + (SELECT count(*) FROM claimed) >= s.max_running
                 THEN 0.5 ELSE 0 END)
    END::float8 AS retry_after
    FROM settings AS s, allowance AS a
    WHERE s.limited AND NOT s.paused
      AND a.n < $2::bigint AND (SELECT count(*) FROM claimed) >= a.n
)
SELECT c.id, c.queue, c.payload, c.priority, c.attempts, c.max_attempts, c.claim_seq,
       c.lease_until, c.locked_after, NULL::float8 AS retry_after,
       NULL::float8 AS database_clock, c.alone, false AS alone_waiting, c.waited,
       c.trace_context, c.checkpoint
FROM claimed AS c
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.retry_after, NULL, NULL, false,
       NULL, NULL, NULL
FROM held AS h
UNION ALL
-- A quarantined row waits for a claim made alone (docs/protocol.rst §13).
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true, NULL, NULL,
       NULL
FROM quarantined AS q WHERE q.waiting
UNION ALL
-- Always one row with the database's clock, rows taken or not: the worker bounds its own
-- clock's offset by it (docs/protocol.rst §8).
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       extract(epoch FROM clock_timestamp())::float8, NULL, false, NULL, NULL, NULL
ORDER BY priority DESC, id;

-- name: renew
-- One statement for every job of a renewal, and the pool's beat. Rows locked elsewhere are
-- skipped, never waited for, and answer 'unchanged'. The verdicts read the locked rows'
-- current versions. With no items it is the pool's beat alone ($5 NULL: no beat). $3 is
-- NULL when no item carries progress (unnest reads a NULL array as a NULL per item); $15,
-- each item's checkpoint as JSON text, likewise (docs/protocol.rst §16).
--
-- Each row is looked up once: `locked` finds it by key, locks it, and works out from its
-- current version both its verdict and every value the renewal writes; `renewed` then goes
-- to that version by its ctid. The verdicts come out of the branches that decided them (one
-- row per item: the items are distinct), with no join back to the items; what only a
-- rarer case needs is skipped, on counts, when that case did not happen.
--
-- The beat ($5..$14) upserts the pool's row in the same statement: an update of the row if
-- it can be locked at once (a beat never waits: a stuck, abandoned renewal may hold it),
-- else an insert when the row is missing. A late beat (older now()) changes nothing.
WITH locked AS (
    -- Each item's row, locked, as it is now: a row updated since the statement's snapshot
    -- is locked and read in its newer version. The items are joined below the lock, so the
    -- planner sizes the join by the jobs table's key (joining the locked rows to the items
    -- afterwards, two CTEs, was estimated at 28 times its 10,000 rows, and had the statement
    -- compiled by JIT: 0.4 s). `= ANY` has a large table read by key for these ids, not
    -- walked in key order to meet the list.
    SELECT j.id, j.ctid AS row_ctid, j.status, j.claim_seq, i.claim_seq AS sent_seq,
           j.status = 'running' AND j.claim_seq = i.claim_seq AS renewable,
           j.cancel_requested_at IS NOT NULL AS cancel_requested,
           -- greatest(): a late statement (an abandoned renewal that came unstuck) has an
           -- older now() and must not shorten the lease a newer renewal gave, nor overwrite
           -- the progress that renewal stored with its own older value (docs/protocol.rst §6).
           greatest(j.not_visible_until, now() + make_interval(secs => $4::float8)) AS new_until,
           -- The floor moves only when it is a quarter of a lease from passing (migration
           -- 0006): until then the renewal changes no indexed column and is a HOT update
           -- (docs/performance.rst). Lifted that early, it never passes under a live lease
           -- renewed at least every V/4, so claims never read such a lease as a candidate.
           CASE
               WHEN j.lease_floor <= now() + make_interval(secs => $4::float8 / 4)
                   THEN greatest(j.not_visible_until, now() + make_interval(secs => $4::float8))
               ELSE j.lease_floor
           END AS new_floor,
           CASE
               WHEN now() + make_interval(secs => $4::float8) >= j.not_visible_until
                   THEN coalesce(i.progress, j.progress)
               ELSE j.progress
           END AS new_progress,
           -- A checkpoint is stored under the same condition as progress; NULL: the row's
           -- own stays (not read here: a large one stays in its TOAST pointer).
           CASE
               WHEN now() + make_interval(secs => $4::float8) >= j.not_visible_until
                   THEN i.checkpoint
           END AS new_checkpoint,
           greatest(j.last_renewed_at, now()) AS new_renewed_at,
           -- The verdict says 'cancel_requested': the directive reaches the pool now.
           CASE
               WHEN j.cancel_requested_at IS NOT NULL THEN coalesce(j.cancel_acknowledged_at, now())
               ELSE j.cancel_acknowledged_at
           END AS new_acknowledged_at
    FROM {schema}.jobs AS j
    JOIN unnest($1::text[]::bigint[], $2::text[]::bigint[], $3::text[]::float8[], $15::text[])
         AS i (id, claim_seq, progress, checkpoint) ON i.id = j.id
    WHERE j.id = ANY ($1::text[]::bigint[])
    FOR UPDATE OF j SKIP LOCKED
),
renewed AS (
    -- By ctid: the version `locked` locked and read, without looking its key up again (by
    -- key, 10,000 jobs in a 310,000-row table read 30,000 more index pages, 5% of the
    -- time). The lock keeps that version the current one until the transaction ends, so
    -- the values worked out from it are the ones to write.
    UPDATE {schema}.jobs AS j
    SET not_visible_until = l.new_until, lease_floor = l.new_floor, progress = l.new_progress,
        last_renewed_at = l.new_renewed_at, cancel_acknowledged_at = l.new_acknowledged_at,
        checkpoint = coalesce(l.new_checkpoint::jsonb, j.checkpoint),
        checkpointed_at = CASE WHEN l.new_checkpoint IS NULL THEN j.checkpointed_at ELSE now() END
    FROM locked AS l
    WHERE j.ctid = l.row_ctid AND l.renewable
    RETURNING j.id, CASE WHEN l.cancel_requested THEN 'cancel_requested' ELSE 'extended' END
        AS verdict
),
tally AS (
    -- Rows written, locked, and renewable: whether `renewed_late` and the last branch of the
    -- verdicts have anything to do, without comparing the rows one by one.
    SELECT (SELECT count(*) FROM renewed) AS renewed,
           count(*) FILTER (WHERE l.renewable) AS renewable,
           count(*) AS locked
    FROM locked AS l
),
renewed_late AS (
    -- A row another transaction updated after the statement's snapshot, before `locked`
    -- reached it: `locked` holds its newer version, which the snapshot does not see, so
    -- `renewed` found nothing at that ctid. Updated by key, as an UPDATE finds a row: the
    -- version the snapshot sees, then the newest, the one locked. Skipped when `renewed`
    -- wrote every renewable row.
    UPDATE {schema}.jobs AS j
    SET not_visible_until = l.new_until, lease_floor = l.new_floor, progress = l.new_progress,
        last_renewed_at = l.new_renewed_at, cancel_acknowledged_at = l.new_acknowledged_at,
        checkpoint = coalesce(l.new_checkpoint::jsonb, j.checkpoint),
        checkpointed_at = CASE WHEN l.new_checkpoint IS NULL THEN j.checkpointed_at ELSE now() END
    FROM locked AS l
    WHERE (SELECT t.renewed < t.renewable FROM tally AS t)
      AND j.id = l.id AND l.renewable AND NOT EXISTS (SELECT FROM renewed AS r WHERE r.id = l.id)
    RETURNING j.id, CASE WHEN l.cancel_requested THEN 'cancel_requested' ELSE 'extended' END
        AS verdict
),
present AS (
    -- The rows the lock skipped that exist (locked elsewhere: 'unchanged', not 'gone'), read
    -- by key for those items alone. (Not a per-item EXISTS in the verdicts: with a SubPlan
    -- there, a renewal of 10,000 jobs took four times as long, ~0.3 s more.)
    SELECT s.id FROM {schema}.jobs AS s
    WHERE s.id = ANY (ARRAY(
        SELECT i.id FROM (SELECT t.id::bigint AS id FROM unnest($1::text[]) AS t (id)) AS i
        WHERE NOT EXISTS (SELECT FROM locked AS l WHERE l.id = i.id)))
),
beat_locked AS (
    SELECT w.worker_id FROM {schema}.workers AS w
    WHERE w.worker_id = $5::text
    FOR UPDATE SKIP LOCKED
),
beat_updated AS (
    UPDATE {schema}.workers AS w
    SET last_beat_at = now(), in_flight = $11::integer, abandoned_renewals = $12::bigint,
        clock_skew = $13::float8, clock_verdict = $14::text  -- docs/protocol.rst §8
    FROM beat_locked AS b
    WHERE w.worker_id = b.worker_id AND w.last_beat_at <= now()
),
beat_inserted AS (
    INSERT INTO {schema}.workers
        (worker_id, host, pid, queue, concurrency, heartbeat_interval, in_flight, abandoned_renewals,
         clock_skew, clock_verdict)
    SELECT $5::text, $6::text, $7::integer, $8::text, $9::integer, $10::float8, $11::integer,
           $12::bigint, $13::float8, $14::text
    WHERE $5::text IS NOT NULL
      AND NOT EXISTS (SELECT FROM {schema}.workers AS w WHERE w.worker_id = $5::text)
    ON CONFLICT (worker_id) DO NOTHING
)
SELECT r.id, r.verdict FROM renewed AS r
UNION ALL
SELECT r.id, r.verdict FROM renewed_late AS r
UNION ALL
SELECT l.id,
       CASE
           WHEN l.status <> 'running' THEN 'gone'
           WHEN l.claim_seq <> l.sent_seq THEN 'reclaimed'
           ELSE 'unchanged'
       END
FROM locked AS l
WHERE l.renewable IS NOT TRUE
UNION ALL
-- The rest, when the branches above answered fewer rows than there are items ($1 has one
-- element per item): rows the lock skipped ('unchanged' when they exist, else 'gone'), and
-- a renewable row no update wrote, were there one ('unchanged', as a skipped row).
SELECT i.id,
       CASE
           WHEN i.id IN (SELECT l.id FROM locked AS l) OR i.id IN (SELECT p.id FROM present AS p)
               THEN 'unchanged'
           ELSE 'gone'
       END
FROM (SELECT t.id::bigint AS id FROM unnest($1::text[]) AS t (id)) AS i
WHERE (SELECT t.renewed + t.locked - t.renewable FROM tally AS t)
          + (SELECT count(*) FROM renewed_late) < cardinality($1::text[])
  AND NOT EXISTS (SELECT FROM renewed AS r WHERE r.id = i.id)
  AND NOT EXISTS (SELECT FROM renewed_late AS r WHERE r.id = i.id)
  AND NOT EXISTS (SELECT FROM locked AS l WHERE l.id = i.id AND l.renewable IS NOT TRUE);

-- fragment: fenced_items
-- The fence of every outcome statement (ack, fail, release, snooze): each item's row, only
-- while it is running with the item's claim_seq (§1, I9). IS TRUE keeps the partial
-- indexes of running rows out of the plan, so the rows are found by primary key whatever
-- the statistics say (docs/performance.rst, "PostgreSQL: history and the hot path"); it
-- means status = 'running', which is never NULL.
FROM items AS i
    WHERE j.id = i.id AND j.claim_seq = i.claim_seq AND (j.status = 'running') IS TRUE

-- name: ack
-- Answers the 1-based positions of the items that applied.
-- $4 is each handler's result as JSON text (NULL for none); a re-run overwrites it. $3 and
-- $4 are NULL when no item carries progress, or a result (unnest reads a NULL array as a
-- NULL per item); so is the progress array of fail and release.
-- A row someone waits for sends f: (in the RETURNING, evaluated for every updated row);
-- the others send nothing, so an ack nobody waits for takes no notify lock at commit.
-- $5 and $6 are each handler's start (seconds after the claim's answer) and run time, each
-- one array literal in a text parameter (asyncpg checks every element of a text[] in
-- Python: two of them cost an ack of 50 jobs 200 such checks), or NULL when no item has
-- them. A succeeded attempt is the job's row (docs/protocol.rst
-- §14): the fenced update writes its started_at and run_seconds with the outcome, and no
-- attempts row is inserted (neither of those two columns is indexed).
WITH items AS (
    SELECT DISTINCT ON (i.id, i.claim_seq) i.id, i.claim_seq, i.progress, i.result,
           i.started_after, i.run_seconds, i.n
    FROM unnest($1::text[]::bigint[], $2::text[]::bigint[], $3::text[]::float8[], $4::text[],
                $5::text::float8[], $6::text::float8[])
         WITH ORDINALITY AS i (id, claim_seq, progress, result, started_after, run_seconds, n)
    ORDER BY i.id, i.claim_seq, i.n
),
acked AS (
    UPDATE {schema}.jobs AS j
    SET status = 'succeeded',
        finished_at = now(),
        progress = coalesce(i.progress, j.progress),
        -- $7: each item's checkpoint (JSON text) by its position, NULL for none (§16).
        checkpoint = coalesce(($7::text[])[i.n]::jsonb, j.checkpoint),
        checkpointed_at = CASE WHEN ($7::text[])[i.n] IS NULL THEN j.checkpointed_at ELSE now() END,
        result = i.result::jsonb,
        started_at = j.claimed_at + make_interval(secs => i.started_after),
        run_seconds = i.run_seconds
    {fragment:fenced_items}
    RETURNING i.n, j.id, j.has_dependents,
              CASE WHEN j.awaited THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END
                  AS finished
),
-- Dependents (docs/protocol.rst §21, migration 0018): the acked rows some job depends on
-- are settled in one call, once every acked row is locked (the function reads the edges
-- on a snapshot of its own, so it sees one an enqueue committed while this waited for
-- that lock); a batch with none calls nothing.
settled AS (
    SELECT CASE WHEN count(*) > 0 THEN {schema}.settle_successes(array_agg(s.id)) END
    FROM acked AS s
    WHERE s.has_dependents
)
SELECT a.n FROM acked AS a, settled;

-- name: fail
-- A failure with a retry delay puts the job back, unless the attempt was the last one or
-- the job was asked to cancel (never retried): then it is final. Answers the positions
-- that applied with the status each row got; one notice per queue that got a job back.
-- $6 and $7 are each error's type and (bounded) traceback, $8 and $9 the handler's start
-- and run time as ack's $5 and $6 (NULL when no item has them). A failure for good
-- with a cancel asked is a cancellation (`cancelled`, docs/protocol.rst §14); `recorded`
-- writes the attempt's row, with the outcome the update decided.
WITH items AS (
    SELECT DISTINCT ON (i.id, i.claim_seq) i.id, i.claim_seq, i.error, i.retry_delay, i.progress,
           i.error_type, i.traceback, i.started_after, i.run_seconds, i.n
    FROM unnest($1::text[]::bigint[], $2::text[]::bigint[], $3::text[],
                $4::text[]::float8[], $5::text[]::float8[], $6::text[], $7::text[],
                $8::text::float8[], $9::text::float8[])
         WITH ORDINALITY AS i (id, claim_seq, error, retry_delay, progress, error_type, traceback,
                               started_after, run_seconds, n)
    ORDER BY i.id, i.claim_seq, i.n
),
failed AS (
    UPDATE {schema}.jobs AS j
    SET progress = coalesce(i.progress, j.progress),
        -- $10: each item's checkpoint (JSON text) by its position, NULL for none (§16).
        checkpoint = coalesce(($10::text[])[i.n]::jsonb, j.checkpoint),
        checkpointed_at = CASE WHEN ($10::text[])[i.n] IS NULL THEN j.checkpointed_at ELSE now() END,
        status = CASE
            WHEN j.cancel_requested_at IS NULL AND i.retry_delay IS NOT NULL
                 AND j.attempts < j.max_attempts THEN 'queued'
            ELSE 'failed'
        END,
        finished_at = CASE
            WHEN j.cancel_requested_at IS NULL AND i.retry_delay IS NOT NULL
                 AND j.attempts < j.max_attempts THEN NULL
            ELSE now()
        END,
        not_visible_until = CASE
            WHEN j.cancel_requested_at IS NULL AND i.retry_delay IS NOT NULL
                 AND j.attempts < j.max_attempts
            THEN now() + make_interval(secs => i.retry_delay)
            ELSE j.not_visible_until
        END,
        last_error = CASE
            WHEN j.cancel_requested_at IS NOT NULL AND NOT starts_with(i.error, 'cancelled')
            THEN 'cancelled: cancel requested (' || i.error || ')'
            ELSE i.error
        END,
        cancelled = j.cancel_requested_at IS NOT NULL
    {fragment:fenced_items}
    RETURNING i.n, j.queue, j.status, j.id, j.claim_seq, j.attempts, j.worker_id, j.host,
              j.claimed_at, j.wait_seconds, j.last_error, j.cancelled, i.error_type, i.traceback,
              i.started_after, i.run_seconds,
              CASE WHEN j.awaited AND j.status = 'failed'
                   THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END AS finished
),
recorded AS (
    INSERT INTO {schema}.attempts
        (job_id, claim_seq, attempt, queue, outcome, worker_id, host, claimed_at, started_at,
         finished_at, run_seconds, wait_seconds, error_type, error, traceback)
    SELECT r.id, r.claim_seq, r.attempts, r.queue,
           CASE WHEN r.cancelled THEN 'cancelled' WHEN r.status = 'queued' THEN 'retry'
                ELSE 'failed' END,
           r.worker_id, r.host, coalesce(r.claimed_at, now()),
           coalesce(r.claimed_at, now()) + make_interval(secs => r.started_after),
           now(), r.run_seconds, r.wait_seconds, r.error_type, r.last_error, r.traceback
    FROM failed AS r
    ON CONFLICT (job_id, claim_seq) DO NOTHING
)
SELECT f.n, f.status,
       (SELECT count(pg_notify({channel}, 'a:' || q.queue))
        FROM (SELECT DISTINCT r.queue FROM failed AS r WHERE r.status = 'queued') AS q) AS notices
FROM failed AS f;

-- name: release
-- Give attempts back uncharged (graceful shutdown; a handler that got no database
-- connection). A job asked to cancel is failed instead: a cancellation, and so is its
-- attempt's row. $4 and $5 are the handlers' timings, as ack's $5 and $6.
WITH items AS (
    SELECT DISTINCT ON (i.id, i.claim_seq) i.id, i.claim_seq, i.progress, i.started_after,
           i.run_seconds, i.n
    FROM unnest($1::text[]::bigint[], $2::text[]::bigint[], $3::text[]::float8[],
                $4::text::float8[], $5::text::float8[])
         WITH ORDINALITY AS i (id, claim_seq, progress, started_after, run_seconds, n)
    ORDER BY i.id, i.claim_seq, i.n
),
released AS (
    UPDATE {schema}.jobs AS j
    SET progress = coalesce(i.progress, j.progress),
        -- $6: each item's checkpoint (JSON text) by its position, NULL for none (§16).
        checkpoint = coalesce(($6::text[])[i.n]::jsonb, j.checkpoint),
        checkpointed_at = CASE WHEN ($6::text[])[i.n] IS NULL THEN j.checkpointed_at ELSE now() END,
        status = CASE WHEN j.cancel_requested_at IS NULL THEN 'queued' ELSE 'failed' END,
        finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
        last_error = CASE
            WHEN j.cancel_requested_at IS NULL THEN j.last_error
            ELSE 'cancelled: cancel requested'
        END,
        attempts = CASE WHEN j.cancel_requested_at IS NULL THEN j.attempts - 1 ELSE j.attempts END,
        not_visible_until = CASE
            WHEN j.cancel_requested_at IS NULL THEN now()
            ELSE j.not_visible_until
        END,
        cancelled = j.cancel_requested_at IS NOT NULL
    {fragment:fenced_items}
    RETURNING i.n, j.queue, j.status, j.id, j.claim_seq, j.attempts, j.worker_id, j.host,
              j.claimed_at, j.wait_seconds, j.last_error, j.cancelled, i.started_after,
              i.run_seconds,
              CASE WHEN j.awaited AND j.status = 'failed'
                   THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END AS finished
),
recorded AS (
    -- A released attempt is not charged: its number is the one the row had before.
    INSERT INTO {schema}.attempts
        (job_id, claim_seq, attempt, queue, outcome, worker_id, host, claimed_at, started_at,
         finished_at, run_seconds, wait_seconds, error)
    SELECT r.id, r.claim_seq, CASE WHEN r.cancelled THEN r.attempts ELSE r.attempts + 1 END,
           r.queue, CASE WHEN r.cancelled THEN 'cancelled' ELSE 'released' END,
           r.worker_id, r.host, coalesce(r.claimed_at, now()),
           coalesce(r.claimed_at, now()) + make_interval(secs => r.started_after),
           now(), r.run_seconds, r.wait_seconds,
           CASE WHEN r.cancelled THEN r.last_error END
    FROM released AS r
    ON CONFLICT (job_id, claim_seq) DO NOTHING
)
SELECT r.n,
       (SELECT count(pg_notify({channel}, 'a:' || q.queue))
        FROM (SELECT DISTINCT s.queue FROM released AS s WHERE s.status = 'queued') AS q) AS notices
FROM released AS r;

-- fragment: outcome_attempt_row
-- The attempt row of snooze's and await_children's rows (written): one that gave its
-- attempt back is numbered as before the claim, one that failed keeps its error.
    INSERT INTO {schema}.attempts
        (job_id, claim_seq, attempt, queue, outcome, worker_id, host, claimed_at, started_at,
         finished_at, run_seconds, wait_seconds, error_type, error)
    SELECT r.id, r.claim_seq,
           CASE WHEN r.given_back THEN r.attempts + 1 ELSE r.attempts END,
           r.queue, r.outcome, r.worker_id, r.host, coalesce(r.claimed_at, now()),
           coalesce(r.claimed_at, now()) + make_interval(secs => r.started_after),
           now(), r.run_seconds, r.wait_seconds, r.error_type,
           CASE WHEN NOT r.given_back THEN r.last_error END
    FROM written AS r
    ON CONFLICT (job_id, claim_seq) DO NOTHING

-- name: snooze
-- The handler asked to run again after a delay, uncharged (docs/protocol.rst §17): the
-- job goes back at now() + $3 seconds with its attempt given back and one more snooze.
-- A job asked to cancel is failed instead, as release fails it (a cancellation); one that
-- snoozed $7 (max_snoozes) times already fails for good, charged, with $8 (the bound's
-- error text, worded by the worker so that both backends store the same words) and is not
-- retried. $5 and $6 are the handlers' timings, as ack's $5 and $6; $9 each item's
-- checkpoint, the last parameter as in the other outcomes (§16). Every CASE reads the
-- locked row itself (j), as fail's do, so a cancel that commits meanwhile is seen. Answers
-- the positions that applied with what each job became: snoozed, failed or cancelled.
WITH items AS (
    SELECT DISTINCT ON (i.id, i.claim_seq) i.id, i.claim_seq, i.seconds, i.progress,
           i.started_after, i.run_seconds, i.n
    FROM unnest($1::text[]::bigint[], $2::text[]::bigint[], $3::text[]::float8[],
                $4::text[]::float8[], $5::text::float8[], $6::text::float8[])
         WITH ORDINALITY AS i (id, claim_seq, seconds, progress, started_after, run_seconds, n)
    ORDER BY i.id, i.claim_seq, i.n
),
written AS (
    UPDATE {schema}.jobs AS j
    SET progress = coalesce(i.progress, j.progress),
        -- $9: each item's checkpoint (JSON text) by its position, NULL for none (§16).
        checkpoint = coalesce(($9::text[])[i.n]::jsonb, j.checkpoint),
        checkpointed_at = CASE WHEN ($9::text[])[i.n] IS NULL THEN j.checkpointed_at ELSE now() END,
        status = CASE
            WHEN j.cancel_requested_at IS NULL AND j.snoozes < $7::int THEN 'queued'
            ELSE 'failed'
        END,
        finished_at = CASE
            WHEN j.cancel_requested_at IS NULL AND j.snoozes < $7::int THEN NULL
            ELSE now()
        END,
        last_error = CASE
            WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled: cancel requested'
            WHEN j.snoozes >= $7::int THEN $8::text
            ELSE j.last_error
        END,
        -- A snooze gives the claim's increment back; a failure of the bound is charged.
        attempts = CASE
            WHEN j.cancel_requested_at IS NULL AND j.snoozes < $7::int THEN j.attempts - 1
            ELSE j.attempts
        END,
        snoozes = CASE
            WHEN j.cancel_requested_at IS NULL AND j.snoozes < $7::int THEN j.snoozes + 1
            ELSE j.snoozes
        END,
        not_visible_until = CASE
            WHEN j.cancel_requested_at IS NULL AND j.snoozes < $7::int
            THEN now() + make_interval(secs => i.seconds)
            ELSE j.not_visible_until
        END,
        cancelled = j.cancel_requested_at IS NOT NULL
    {fragment:fenced_items}
    RETURNING i.n, j.queue, j.status, j.id, j.claim_seq, j.attempts, j.worker_id, j.host,
              j.claimed_at, j.wait_seconds, j.last_error, i.started_after, i.run_seconds,
              CASE WHEN j.cancelled THEN 'cancelled' WHEN j.status = 'queued' THEN 'snoozed'
                   ELSE 'failed' END AS became,
              CASE WHEN j.cancelled THEN 'cancelled' WHEN j.status = 'queued' THEN 'snoozed'
                   ELSE 'failed' END AS outcome,
              j.status = 'queued' AS given_back,
              CASE WHEN NOT j.cancelled AND j.status = 'failed'
                   THEN 'SnoozeLimitExceeded' END AS error_type,
              CASE WHEN j.awaited AND j.status = 'failed'
                   THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END AS finished
),
recorded AS (
    -- A snoozed attempt is not charged: its number is the one the row had before.
{fragment:outcome_attempt_row})
SELECT s.n, s.became,
       (SELECT count(pg_notify({channel}, 'a:' || q.queue))
        FROM (SELECT DISTINCT r.queue FROM written AS r WHERE r.status = 'queued') AS q) AS notices
FROM written AS s;

-- name: await_children
-- The handler asked to wait for its children (docs/protocol.rst §22): the job goes back
-- queued, its attempt given back, waiting for its unfinished children through §21's edges
-- (child, parent) and waiting count, with $3 (the policy, 'fail' or 'continue') as its
-- dependency_failure. The fenced rows are locked first, then their children in id order,
-- read at their latest versions: a child finishing meanwhile either committed first (it is
-- not counted) or waits for this statement and then settles the parent (its statements
-- read the edges after its lock). A child already failed fails the parent under 'fail',
-- naming the lowest; a job asked to cancel is failed instead, a cancellation. $4 to $6
-- and $7 as snooze's $4 to $6 and $9. Answers the positions that applied with what each
-- job became: waiting, failed or cancelled.
WITH items AS (
    SELECT DISTINCT ON (i.id, i.claim_seq) i.id, i.claim_seq, i.policy, i.progress,
           i.started_after, i.run_seconds, i.n
    FROM unnest($1::text[]::bigint[], $2::text[]::bigint[], $3::text[],
                $4::text[]::float8[], $5::text::float8[], $6::text::float8[])
         WITH ORDINALITY AS i (id, claim_seq, policy, progress, started_after, run_seconds, n)
    ORDER BY i.id, i.claim_seq, i.n
),
fenced AS (
    SELECT j.id, j.cancel_requested_at, i.claim_seq, i.policy, i.progress, i.started_after,
           i.run_seconds, i.n
    FROM {schema}.jobs AS j JOIN items AS i ON j.id = i.id AND j.claim_seq = i.claim_seq
    WHERE (j.status = 'running') IS TRUE
    ORDER BY j.id
    FOR UPDATE OF j
),
children AS (
    SELECT c.id, c.parent_id, c.status
    FROM {schema}.jobs AS c
    WHERE c.parent_id IN (SELECT f.id FROM fenced AS f WHERE f.cancel_requested_at IS NULL)
      AND c.status IN ('queued', 'running', 'failed')
    ORDER BY c.id
    FOR UPDATE OF c
),
decided AS (
    SELECT f.*,
           count(c.id) FILTER (WHERE c.status <> 'failed') AS unfinished,
           min(c.id) FILTER (WHERE c.status = 'failed') AS failed_child,
           CASE WHEN f.cancel_requested_at IS NOT NULL THEN 'cancelled'
                WHEN f.policy = 'fail' AND bool_or(c.status = 'failed') THEN 'failed'
                ELSE 'waiting' END AS became
    FROM fenced AS f LEFT JOIN children AS c ON c.parent_id = f.id
    GROUP BY f.id, f.cancel_requested_at, f.claim_seq, f.policy, f.progress, f.started_after,
             f.run_seconds, f.n
),
awaited AS (
    SELECT c.id, c.parent_id
    FROM children AS c JOIN decided AS d ON d.id = c.parent_id
    WHERE d.became = 'waiting' AND c.status <> 'failed'
),
edges AS (
    INSERT INTO {schema}.job_edges (dependency_id, dependent_id)
    SELECT a.id, a.parent_id FROM awaited AS a
    ON CONFLICT DO NOTHING
),
-- A child that is itself one of this statement's jobs is marked by the update below: one
-- statement may not update a row twice.
marked AS (
    UPDATE {schema}.jobs AS c
    SET has_dependents = true
    FROM awaited AS a
    WHERE c.id = a.id AND NOT c.has_dependents AND a.id NOT IN (SELECT d.id FROM decided AS d)
),
written AS (
    UPDATE {schema}.jobs AS j
    SET progress = coalesce(d.progress, j.progress),
        checkpoint = coalesce(($7::text[])[d.n]::jsonb, j.checkpoint),
        checkpointed_at = CASE WHEN ($7::text[])[d.n] IS NULL THEN j.checkpointed_at ELSE now() END,
        status = CASE WHEN d.became = 'waiting' THEN 'queued' ELSE 'failed' END,
        finished_at = CASE WHEN d.became = 'waiting' THEN NULL ELSE now() END,
        last_error = CASE
            WHEN d.became = 'cancelled' THEN 'cancelled: cancel requested'
            WHEN d.became = 'failed' THEN 'dependency ' || d.failed_child || ' failed'
            ELSE j.last_error
        END,
        -- The wait gives the claim's increment back; a failure is charged.
        attempts = CASE WHEN d.became = 'waiting' THEN j.attempts - 1 ELSE j.attempts END,
        waiting = CASE WHEN d.became = 'waiting' THEN d.unfinished ELSE 0 END,
        not_visible_until = CASE
            WHEN d.became = 'waiting' AND d.unfinished > 0 THEN 'infinity'
            WHEN d.became = 'waiting' THEN now()
            ELSE j.not_visible_until
        END,
        dependency_failure = CASE
            WHEN d.became = 'waiting' THEN d.policy ELSE j.dependency_failure
        END,
        awaits_children = j.awaits_children OR d.became = 'waiting',
        has_dependents = j.has_dependents OR j.id IN (SELECT a.id FROM awaited AS a),
        cancelled = d.became = 'cancelled'
    FROM decided AS d
    WHERE j.id = d.id
    RETURNING d.n, j.queue, j.status, j.id, j.claim_seq, j.attempts, j.worker_id, j.host,
              j.claimed_at, j.wait_seconds, j.last_error, j.waiting, d.started_after,
              d.run_seconds, d.became,
              CASE WHEN d.became = 'waiting' THEN 'awaiting' ELSE d.became END AS outcome,
              d.became = 'waiting' AS given_back, NULL::text AS error_type,
              CASE WHEN j.awaited AND j.status = 'failed'
                   THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END AS finished
),
recorded AS (
    -- The wait's attempt is not charged: its number is the one the row had before.
{fragment:outcome_attempt_row})
SELECT w.n, w.became,
       (SELECT count(pg_notify({channel}, 'a:' || q.queue))
        FROM (SELECT DISTINCT r.queue FROM written AS r
              WHERE r.status = 'queued' AND r.waiting = 0) AS q) AS notices
FROM written AS w;

-- name: prune
-- Retention: delete up to $2 rows that finished more than $1 seconds ago.
WITH doomed AS (
    SELECT j.id FROM {schema}.jobs AS j
    WHERE j.finished_at < now() - make_interval(secs => $1::float8)
    ORDER BY j.finished_at
    LIMIT $2::bigint
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.jobs AS j USING doomed AS d WHERE j.id = d.id RETURNING 1
)
SELECT count(*) FROM deleted;

-- ---------------------------------------------------------------------------------------
-- Schedules (docs/scheduling.rst). Ticks are computed in Python (trioqueue/_core/schedule.py):
-- timestamps travel as ISO 8601 text and are cast here.

-- name: database_now
-- The database's clock, from which set_schedule computes a schedule's first tick.
SELECT now();

-- name: database_clock
-- The database's clock as it runs (not the transaction's start): the probe of a pool that
-- stopped claiming for clock skew (docs/protocol.rst §8).
SELECT extract(epoch FROM clock_timestamp())::float8;

-- name: set_schedule
-- Create or replace a schedule; a replaced one keeps its last_run_at. $8 is the next tick
-- after the now() read just before, on the same connection (see schedules.py).
INSERT INTO {schema}.schedules AS s
    (name, queue, cron, timezone, payload, priority, max_attempts, next_run_at)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text::jsonb, $6::integer, $7::integer,
        $8::text::timestamptz)
ON CONFLICT (name) DO UPDATE
SET queue = excluded.queue, cron = excluded.cron, timezone = excluded.timezone,
    payload = excluded.payload, priority = excluded.priority,
    max_attempts = excluded.max_attempts, next_run_at = excluded.next_run_at,
    updated_at = now();

-- name: delete_schedule
DELETE FROM {schema}.schedules AS s WHERE s.name = $1::text RETURNING 1;

-- name: list_schedules
SELECT s.name, s.queue, s.cron, s.timezone, s.payload::text AS payload, s.priority,
       s.max_attempts, s.next_run_at, s.last_run_at, s.enabled
FROM {schema}.schedules AS s
ORDER BY s.name;

-- name: get_schedule
SELECT s.name, s.queue, s.cron, s.timezone, s.payload::text AS payload, s.priority,
       s.max_attempts, s.next_run_at, s.last_run_at, s.enabled
FROM {schema}.schedules AS s
WHERE s.name = $1::text;

-- name: due_schedules
-- The schedules due now (at most $1, earliest first), and the statement's now(): the
-- instant after which each one's next tick is computed. A disabled schedule is never due.
SELECT s.name, s.cron, s.timezone, s.next_run_at, now() AS now
FROM {schema}.schedules AS s
WHERE s.enabled AND s.next_run_at <= now()
ORDER BY s.next_run_at, s.name
LIMIT $1::bigint;

-- name: advance_schedules
-- For each (name, expected, next): when the schedule is still due at exactly `expected`
-- (the next_run_at due_schedules read), move next_run_at to `next` and enqueue one job for
-- the tick `expected`, in one statement. A row another pass holds is skipped (SKIP
-- LOCKED), and one it advanced meanwhile no longer matches `expected` (the lock re-reads
-- the newest row version): only one pass enqueues a tick. The unique index on
-- (schedule_name, schedule_tick) backs this up. One disabled meanwhile is skipped too. One
-- notice per queue that got a job.
WITH items AS (
    SELECT i.name, i.expected::timestamptz AS expected, i.next::timestamptz AS next
    FROM unnest($1::text[], $2::text[], $3::text[]) AS i (name, expected, next)
),
locked AS (
    SELECT s.name FROM {schema}.schedules AS s
    JOIN items AS i ON i.name = s.name
    WHERE s.next_run_at = i.expected AND s.next_run_at <= now() AND s.enabled
    FOR UPDATE OF s SKIP LOCKED
),
advanced AS (
    UPDATE {schema}.schedules AS s
    SET next_run_at = i.next, last_run_at = now()
    FROM items AS i, locked AS l
    WHERE s.name = i.name AND l.name = i.name
    RETURNING s.name, s.queue, s.payload, s.priority, s.max_attempts, i.expected AS tick
),
inserted AS (
    INSERT INTO {schema}.jobs
        (queue, payload, priority, max_attempts, not_visible_until, schedule_name, schedule_tick)
    SELECT a.queue, a.payload, a.priority, a.max_attempts, now(), a.name, a.tick
    FROM advanced AS a
    ORDER BY a.tick, a.name
    ON CONFLICT (schedule_name, schedule_tick) WHERE schedule_name IS NOT NULL DO NOTHING
    RETURNING id, queue
),
notified AS (
    SELECT pg_notify({channel}, 'a:' || q.queue) FROM (SELECT DISTINCT queue FROM inserted) AS q
)
SELECT i.id FROM inserted AS i, (SELECT count(*) FROM notified) AS n
ORDER BY i.id;

-- ---------------------------------------------------------------------------------------
-- Attempt history (docs/protocol.rst §14, migration 0009): the operator's reads.

-- name: list_attempts
-- One job's attempts, oldest first (its attempts rows, and the job's row when it succeeded:
-- the view attempt_rows); an unknown job answers no row at all, a job with no attempt yet
-- one row of NULLs.
SELECT a.claim_seq, a.attempt, a.outcome, a.worker_id, a.host, a.claimed_at, a.started_at,
       a.finished_at, a.run_seconds, a.wait_seconds, a.error_type, a.error, a.traceback
FROM {schema}.jobs AS j
LEFT JOIN {schema}.attempt_rows AS a ON a.job_id = j.id
WHERE j.id = $1::bigint
ORDER BY a.claim_seq;

-- name: queue_timings
-- Per queue (or only $2), the run time and wait percentiles of the attempts finished in the
-- $1 seconds before now(), lost ones left out (they told nothing of their run): a range
-- scan of attempts_finished_idx per queue for the attempts rows, and of jobs_finished_idx
-- for the succeeded jobs (the view attempt_rows).
SELECT a.queue, count(*) AS attempts,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY a.run_seconds) AS run_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY a.run_seconds) AS run_p95,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY a.run_seconds) AS run_p99,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY a.wait_seconds) AS wait_p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY a.wait_seconds) AS wait_p95,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY a.wait_seconds) AS wait_p99
FROM {schema}.attempt_rows AS a
WHERE a.finished_at >= now() - make_interval(secs => $1::float8)
  AND a.outcome <> 'lost'
  AND ($2::text IS NULL OR a.queue = $2::text)
GROUP BY a.queue
ORDER BY a.queue;

-- name: attempt_history
-- Attempts finished per bucket, bucketed as finished_history buckets jobs, with their
-- counts by outcome and percentiles; every bucket present, oldest first.
WITH counted AS (
    SELECT least(floor(extract(epoch FROM a.finished_at - (now() - make_interval(secs => $1::float8)))
                       / ($1::float8 / $2::integer))::integer,
                 $2::integer - 1) AS n,
           count(*) FILTER (WHERE a.outcome = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE a.outcome IN ('failed', 'retry')) AS failed,
           count(*) FILTER (WHERE a.outcome = 'cancelled') AS cancelled,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY a.run_seconds) AS run_p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY a.run_seconds) AS run_p95,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY a.wait_seconds) AS wait_p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY a.wait_seconds) AS wait_p95
    FROM {schema}.attempt_rows AS a
    WHERE a.finished_at >= now() - make_interval(secs => $1::float8)
      AND a.outcome <> 'lost'
      AND ($3::text IS NULL OR a.queue = $3::text)
    GROUP BY 1
)
SELECT g.n,
       now() - make_interval(secs => $1::float8) + make_interval(secs => g.n * ($1::float8 / $2::integer))
           AS start,
       coalesce(c.succeeded, 0) AS succeeded, coalesce(c.failed, 0) AS failed,
       coalesce(c.cancelled, 0) AS cancelled,
       c.run_p50, c.run_p95, c.wait_p50, c.wait_p95
FROM generate_series(0, $2::integer - 1) AS g (n)
LEFT JOIN counted AS c ON c.n = g.n
ORDER BY g.n;
