-- What the operator's dashboard shows: a job's lease details, the worker pools, and one
-- definition of a job's public state.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- When the lease was last taken (claim) or renewed; never moves backwards.
ALTER TABLE {schema}.jobs ADD COLUMN last_renewed_at timestamptz;
-- When a renewal first delivered the cancel directive to the pool holding the job.
ALTER TABLE {schema}.jobs ADD COLUMN cancel_acknowledged_at timestamptz;

-- One row per running worker pool: written at its start (register_pool), by its beats
-- (which ride in its guard's renewal statement), deleted on graceful shutdown. A pool is
-- stale once last_beat_at is more than 3 heartbeat_intervals old.
CREATE TABLE {schema}.workers (
    worker_id          text PRIMARY KEY,
    host               text NOT NULL,
    pid                integer NOT NULL CHECK (pid >= 0),
    queue              text NOT NULL,
    concurrency        integer NOT NULL CHECK (concurrency >= 1),
    heartbeat_interval double precision NOT NULL CHECK (heartbeat_interval > 0),
    in_flight          integer NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    abandoned_renewals bigint NOT NULL DEFAULT 0 CHECK (abandoned_renewals >= 0),
    started_at         timestamptz NOT NULL DEFAULT now(),
    last_beat_at       timestamptz NOT NULL DEFAULT now()
);

-- A job's public state at the time `at` (JobInfo.status): what get_job, list_jobs, counts
-- and queue_stats report. A plain SQL expression, so the planner inlines it; `at` is a
-- parameter (the caller's now()) so that the function is immutable. Not on the claim or
-- renewal path.
CREATE FUNCTION {schema}.job_state(status text, not_visible_until timestamptz, at timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IN ('succeeded', 'failed') THEN status
        WHEN status = 'running' AND not_visible_until > at THEN 'running'
        WHEN not_visible_until > at THEN 'scheduled'
        ELSE 'ready'
    END
$$;
