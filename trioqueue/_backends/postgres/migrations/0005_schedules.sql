-- Schedules: periodic jobs from a cron expression in a time zone (docs/scheduling.rst).
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- One row per schedule. next_run_at is the next tick, computed in Python from cron and
-- timezone (PostgreSQL cannot evaluate cron); a pool's scheduling pass enqueues a job for
-- every row due and advances next_run_at with a compare-and-set on the value it read, so
-- each tick is enqueued by one pool only.
CREATE TABLE {schema}.schedules (
    name         text PRIMARY KEY,
    queue        text NOT NULL,
    cron         text NOT NULL,
    timezone     text NOT NULL,
    payload      jsonb NOT NULL,
    priority     integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL CHECK (max_attempts >= 1),
    next_run_at  timestamptz NOT NULL,
    -- When a pool last enqueued a job for it (the database's clock); NULL: never.
    last_run_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- A scheduling pass reads the due rows in next_run_at order.
CREATE INDEX schedules_next_run_idx ON {schema}.schedules (next_run_at);

-- A job enqueued by a schedule names the schedule and the tick it stands for. The unique
-- index makes a second job for the same tick impossible, whatever race a pass might lose:
-- the enqueue of a tick is exactly-once even if the compare-and-set were ever bypassed.
-- Other jobs (schedule_name NULL) have no entry in it, so it costs their inserts nothing.
ALTER TABLE {schema}.jobs ADD COLUMN schedule_name text;
ALTER TABLE {schema}.jobs ADD COLUMN schedule_tick timestamptz;
CREATE UNIQUE INDEX jobs_schedule_tick_idx
    ON {schema}.jobs (schedule_name, schedule_tick)
    WHERE schedule_name IS NOT NULL;
