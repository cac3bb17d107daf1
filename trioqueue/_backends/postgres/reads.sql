-- The counts of the operator's reads on a big table (docs/dashboard.rst, "Big tables"):
-- queue_stats and counts count live jobs exactly, from the claim path's partial indexes
-- (only unfinished rows are in them), and finished jobs exactly while the table holds
-- few of them, by estimate past that. Read with queries.sql (sql.py); the same placeholders.
-- The statements of list_jobs and its counts are built by job_lists.py.

-- name: live_stats
-- Unfinished jobs per queue and state, and per state the earliest not_visible_until (for
-- 'ready' rows, when the oldest became claimable). The OR of the two statuses is what lets
-- the planner read each partial claim index (a BitmapOr), not the table. A job waiting for
-- its dependencies or children is queued at 'infinity' (docs/protocol.rst §21): counted,
-- but left out of since and age (PostgreSQL cannot subtract an infinite timestamp, and it
-- has no time to be due at); a state whose rows all wait has NULL for both.
SELECT j.queue,
       {schema}.job_state(j.status, j.not_visible_until, now()) AS state,
       count(*) AS n,
       min(j.not_visible_until) FILTER (WHERE j.not_visible_until < 'infinity') AS since,
       extract(epoch FROM now() - min(j.not_visible_until)
                                  FILTER (WHERE j.not_visible_until < 'infinity'))::float8 AS age
FROM {schema}.jobs AS j
WHERE j.status = 'queued' OR j.status = 'running'
GROUP BY 1, 2;

-- name: configured_queues
SELECT q.queue, q.paused, q.max_running, q.max_per_second FROM {schema}.queues AS q;

-- name: finished_probe
-- Whether the table holds more than $1 finished jobs: at most $1 + 1 entries of
-- jobs_finished_idx are read (an index-only scan once vacuum set the visibility map).
SELECT count(*) FROM (
    SELECT 1 FROM {schema}.jobs AS j WHERE j.finished_at IS NOT NULL LIMIT $1::bigint + 1
) AS f;

-- name: finished_counts
-- Finished jobs per queue and state, exactly (run when finished_probe found few).
SELECT j.queue, j.status AS state, count(*) AS n
FROM {schema}.jobs AS j
WHERE j.finished_at IS NOT NULL AND j.status IN ('succeeded', 'failed')
GROUP BY 1, 2;

-- name: finished_estimates
-- Finished jobs per queue and state, estimated from the planner's statistics (schema $1):
-- the table's rows as the planner scales them (reltuples per page at the last ANALYZE or
-- VACUUM, times the pages the table has now), times each (queue, status) pair's frequency
-- in the extended statistics of migration 0013. Before their first ANALYZE, per-column
-- statistics stand in (queue frequency times status frequency). Pairs too rare for the
-- statistics' most-common list are left out. No row of a trioqueue table is read.
WITH total AS (
    SELECT CASE WHEN c.relpages > 0
                THEN c.reltuples / c.relpages
                     * (pg_relation_size(c.oid) / current_setting('block_size')::float8)
                ELSE greatest(c.reltuples, 0) END AS n
    FROM pg_catalog.pg_class AS c
    JOIN pg_catalog.pg_namespace AS ns ON ns.oid = c.relnamespace
    WHERE ns.nspname = $1::text AND c.relname = 'jobs'
),
pairs AS (
    SELECT s.most_common_vals AS vals, s.most_common_freqs AS freqs
    FROM pg_catalog.pg_stats_ext AS s
    WHERE s.statistics_schemaname = $1::text AND s.statistics_name = 'jobs_queue_status_stats'
      AND s.most_common_vals IS NOT NULL
    LIMIT 1
),
columns AS (
    SELECT s.attname, s.most_common_vals::text::text[] AS vals, s.most_common_freqs AS freqs
    FROM pg_catalog.pg_stats AS s
    WHERE s.schemaname = $1::text AND s.tablename = 'jobs' AND s.attname IN ('queue', 'status')
      AND s.most_common_vals IS NOT NULL
)
SELECT p.vals[i][1] AS queue, p.vals[i][2] AS state, round(p.freqs[i] * t.n)::bigint AS n
FROM pairs AS p, total AS t, generate_subscripts(p.freqs, 1) AS i
WHERE p.vals[i][2] IN ('succeeded', 'failed')
UNION ALL
SELECT q.vals[a], s.vals[b], round(q.freqs[a] * s.freqs[b] * t.n)::bigint
FROM columns AS q, columns AS s, total AS t,
     generate_subscripts(q.freqs, 1) AS a, generate_subscripts(s.freqs, 1) AS b
WHERE q.attname = 'queue' AND s.attname = 'status' AND s.vals[b] IN ('succeeded', 'failed')
  AND NOT EXISTS (SELECT FROM pairs);
