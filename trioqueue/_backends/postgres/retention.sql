-- Retention and the maintainer lease (docs/protocol.rst §15, migration 0011). Read with
-- queries.sql (sql.py); the same placeholders. The reference model mirrors each named
-- query here with a method of the same name (trioqueue/_backends/memory/model.py).
--
-- Keep-times are float8 seconds, NULL for ever. Lease times are the database's: a lease
-- is judged live by now() and set from clock_timestamp() (the moment the row is locked,
-- as a job's claim sets its lease, §1).

-- name: get_retention
-- The settings row first (queue NULL), then the queues' own policies by name.
SELECT NULL::text AS queue, s.default_succeeded AS succeeded, s.default_failed AS failed,
       s.audit
FROM {schema}.retention_settings AS s
UNION ALL
(SELECT r.queue, r.succeeded, r.failed, NULL FROM {schema}.retention AS r ORDER BY r.queue);

-- name: set_retention
-- A queue's own policy ($1 a name), or the default ($1 NULL).
WITH own AS (
    INSERT INTO {schema}.retention AS r (queue, succeeded, failed)
    SELECT $1::text, $2::float8, $3::float8 WHERE $1::text IS NOT NULL
    ON CONFLICT (queue) DO UPDATE SET succeeded = excluded.succeeded, failed = excluded.failed
    RETURNING 1
),
fallback AS (
    UPDATE {schema}.retention_settings AS s
    SET default_succeeded = $2::float8, default_failed = $3::float8
    WHERE $1::text IS NULL
    RETURNING 1
)
SELECT (SELECT count(*) FROM own) + (SELECT count(*) FROM fallback);

-- name: clear_retention
DELETE FROM {schema}.retention AS r WHERE r.queue = $1::text RETURNING 1;

-- name: set_audit_retention
UPDATE {schema}.retention_settings AS s SET audit = $1::float8;

-- name: maintainer
SELECT m.holder, m.seq, m.acquired_at, m.not_visible_until
FROM {schema}.maintainer AS m
WHERE m.holder IS NOT NULL;

-- name: claim_maintainer
-- Take the lease when it is free or ran out, moving the fence on; no row while a lease is
-- live, its holder's own too (a holder renews instead). The UPDATE waits for a prune batch
-- that holds the row (FOR SHARE, below): no claim commits while an older fence deletes.
UPDATE {schema}.maintainer AS m
SET holder = $1::text, seq = m.seq + 1, acquired_at = clock_timestamp(),
    not_visible_until = clock_timestamp() + make_interval(secs => $2::float8)
WHERE m.not_visible_until <= now()
RETURNING m.seq;

-- name: renew_maintainer
-- Extend a live lease, fenced by holder and seq; never shortens it (§6's rule for jobs).
UPDATE {schema}.maintainer AS m
SET not_visible_until = greatest(m.not_visible_until,
                                 clock_timestamp() + make_interval(secs => $3::float8))
WHERE m.holder = $1::text AND m.seq = $2::bigint AND m.not_visible_until > now()
RETURNING 1;

-- name: release_maintainer
-- End a live lease now (a graceful stop): the next claim takes it at once.
UPDATE {schema}.maintainer AS m
SET not_visible_until = now()
WHERE m.holder = $1::text AND m.seq = $2::bigint AND m.not_visible_until > now()
RETURNING 1;

-- fragment: retention_keeps
-- Two CTEs that prune_retained and retention_preview share: `queues`, the queues holding
-- finished rows, by a loose index scan of jobs_retention_idx (one probe per queue), and
-- `keeps`, each such queue's keep-time per status by its own policy, else the default
-- (NULL: kept for ever). The settings row is read by scalar subqueries (each once), so
-- that the planner never multiplies its estimates by that table's.
queues (queue) AS (
    (SELECT j.queue FROM {schema}.jobs AS j
     WHERE j.finished_at IS NOT NULL ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {schema}.jobs AS j
            WHERE j.finished_at IS NOT NULL AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
    FROM queues AS q
    WHERE q.queue IS NOT NULL
),
keeps AS (
    SELECT q.queue, k.status, k.keep
    FROM queues AS q
    LEFT JOIN {schema}.retention AS r ON r.queue = q.queue
    CROSS JOIN LATERAL (VALUES
        ('succeeded', CASE WHEN r.queue IS NULL
                           THEN (SELECT s.default_succeeded FROM {schema}.retention_settings AS s)
                           ELSE r.succeeded END),
        ('failed', CASE WHEN r.queue IS NULL
                        THEN (SELECT s.default_failed FROM {schema}.retention_settings AS s)
                        ELSE r.failed END)
    ) AS k (status, keep)
    WHERE q.queue IS NOT NULL
)

-- name: prune_retained
-- One retention batch under the maintainer lease of fence $1: at most $2 finished jobs past
-- their queue's policy, oldest first, and at most $2 audit entries past the audit log's.
--
-- The fence: `lease` reads the maintainer row FOR SHARE, so it holds only while seq is $1
-- and the lease is live, and a claim (an UPDATE of that row) waits until this statement's
-- transaction ends. Every deleting part needs a `lease` row: a stale maintainer deletes
-- nothing (I17).
--
-- The jobs: the queues holding finished rows come from a loose index scan of
-- jobs_retention_idx (one probe per queue); per queue and status, its policy's cutoff and,
-- by the same index, its oldest rows before the cutoff (at most $2 each). The $2 oldest of
-- those are the candidates, locked FOR UPDATE SKIP LOCKED with their status and cutoff
-- checked again on the locked row (a job retried meanwhile is unfinished: never deleted,
-- I16). Their attempts rows go by the delete trigger of migration 0009; results live on
-- the job's row. No statement reads more than about $2 rows per (queue, status) or locks
-- more than $2 jobs, so it holds no lock or snapshot long enough to hurt claims.
--
-- The caller runs it with jit off (SET LOCAL, retention.py): its estimates (a recursive
-- CTE, one bounded scan per queue and status) are far above what it reads, and past
-- jit_above_cost PostgreSQL spent seconds compiling a statement that runs in milliseconds.
-- And with bitmap scans off: where the statistics say a queue's rows past its cutoff are
-- few, or vacuum has not yet marked their pages all-visible, the planner would read each
-- queue's rows by a bitmap scan, which cannot stop at $2 rows: it reads every row past
-- the cutoff and sorts them. The ordered index-only scan stops at $2 whatever the count.
WITH RECURSIVE lease AS MATERIALIZED (
    SELECT m.seq FROM {schema}.maintainer AS m
    WHERE m.seq = $1::bigint AND m.not_visible_until > now()
    FOR SHARE
),
{fragment:retention_keeps},
policies AS (
    SELECT k.queue, k.status, now() - make_interval(secs => k.keep) AS cutoff
    FROM keeps AS k
    WHERE k.keep IS NOT NULL AND EXISTS (SELECT FROM lease)
),
candidates AS MATERIALIZED (
    SELECT c.id, p.status, p.cutoff
    FROM policies AS p
    CROSS JOIN LATERAL (
        -- The cutoff as a row comparison, which only jobs_retention_idx can take as its
        -- bound (jobs_finished_idx would walk past every queue's older rows): the scan
        -- starts at the oldest row of this queue and status and stops at $2 rows.
        SELECT j.id, j.finished_at FROM {schema}.jobs AS j
        WHERE j.queue = p.queue AND j.status = p.status AND j.finished_at IS NOT NULL
          AND (j.queue, j.status, j.finished_at) < (p.queue, p.status, p.cutoff)
        ORDER BY j.queue, j.status, j.finished_at
        LIMIT $2::bigint
    ) AS c
    ORDER BY c.finished_at, c.id
    LIMIT $2::bigint
),
doomed AS (
    -- Locked by id (the array: a primary-key probe each), checked again on the locked row.
    SELECT j.id FROM {schema}.jobs AS j
    JOIN candidates AS c ON c.id = j.id
    WHERE j.id = ANY (ARRAY(SELECT c2.id FROM candidates AS c2))
      AND j.status = c.status AND j.finished_at IS NOT NULL AND j.finished_at < c.cutoff
    FOR UPDATE OF j SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.jobs AS j
    WHERE j.id = ANY (ARRAY(SELECT d.id FROM doomed AS d))
    RETURNING j.id, j.queue, j.status
),
audit_doomed AS (
    SELECT a.id FROM {schema}.audit_log AS a
    WHERE a.at < now() - make_interval(
              secs => (SELECT s.audit FROM {schema}.retention_settings AS s))
      AND EXISTS (SELECT FROM lease)
    ORDER BY a.at
    LIMIT $2::bigint
    FOR UPDATE OF a SKIP LOCKED
),
audit_deleted AS (
    DELETE FROM {schema}.audit_log AS a
    WHERE a.id = ANY (ARRAY(SELECT d.id FROM audit_doomed AS d))
    RETURNING 1
),
per_kind AS (
    SELECT d.queue, d.status, count(*) AS n FROM deleted AS d GROUP BY 1, 2
)
SELECT EXISTS (SELECT FROM lease) AS fenced,
       (SELECT array_agg(k.queue ORDER BY k.queue, k.status) FROM per_kind AS k) AS queues,
       (SELECT array_agg(k.status ORDER BY k.queue, k.status) FROM per_kind AS k) AS statuses,
       (SELECT array_agg(k.n ORDER BY k.queue, k.status) FROM per_kind AS k) AS counts,
       (SELECT count(*) FROM audit_deleted) AS audit_deleted,
       (SELECT count(*) FROM candidates) = $2::bigint
           OR (SELECT count(*) FROM audit_doomed) = $2::bigint AS more,
       extract(epoch FROM now() - (
           SELECT j.finished_at FROM {schema}.jobs AS j
           WHERE j.finished_at IS NOT NULL
             AND j.id NOT IN (SELECT d.id FROM deleted AS d)  -- (a hashed subplan)
           ORDER BY j.finished_at
           LIMIT 1))::float8 AS oldest_finished_age;

-- name: retention_preview
-- What a prune would delete now, counted, deleting nothing and locking nothing: per queue
-- and status, the finished jobs past their queue's policy ($1 NULL) or finished more than
-- $1 seconds ago whatever the policies say (the age prune of `prune`), and the audit
-- entries past the audit log's keep-time (0 with $1: the age prune keeps them). The same
-- loose index scan and row comparison as prune_retained, so each count is an index-only
-- range scan of jobs_retention_idx; unlike a batch it is not bounded: it counts every
-- row a full pass would delete. Rows locked or retried meanwhile are counted as they
-- stand in this statement's snapshot.
WITH RECURSIVE {fragment:retention_keeps},
policies AS (
    SELECT k.queue, k.status, now() - make_interval(secs => coalesce($1::float8, k.keep)) AS cutoff
    FROM keeps AS k
    WHERE coalesce($1::float8, k.keep) IS NOT NULL
),
due AS (
    SELECT p.queue, p.status, c.n
    FROM policies AS p
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM {schema}.jobs AS j
        WHERE j.queue = p.queue AND j.status = p.status AND j.finished_at IS NOT NULL
          AND (j.queue, j.status, j.finished_at) < (p.queue, p.status, p.cutoff)
    ) AS c
    WHERE c.n > 0
)
SELECT (SELECT array_agg(d.queue ORDER BY d.queue, d.status) FROM due AS d) AS queues,
       (SELECT array_agg(d.status ORDER BY d.queue, d.status) FROM due AS d) AS statuses,
       (SELECT array_agg(d.n ORDER BY d.queue, d.status) FROM due AS d) AS counts,
       CASE WHEN $1::float8 IS NOT NULL THEN 0 ELSE (
           SELECT count(*) FROM {schema}.audit_log AS a
           WHERE a.at < now() - make_interval(
                     secs => (SELECT s.audit FROM {schema}.retention_settings AS s))
       ) END AS audit_due;
