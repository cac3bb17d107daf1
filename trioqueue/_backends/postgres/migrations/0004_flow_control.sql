-- Flow control: per-queue settings (pause, limits), groups, and finishes someone waits for.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- One row per queue an operator configured (pause_queue, set_queue_limits); a queue
-- without a row runs unpaused and unlimited, and its claims never read more than this
-- table's primary key. The claim of a queue with limits locks its row first (docs/flow.rst).
CREATE TABLE {schema}.queues (
    queue          text PRIMARY KEY,
    paused         boolean NOT NULL DEFAULT false,
    -- At most this many jobs of the queue under a live lease at once, across every pool.
    max_running    integer CHECK (max_running >= 1),
    -- Claims of the queue per second across every pool: a token bucket holding at most
    -- one second's worth (max_per_second tokens, at least 1), refilled continuously.
    max_per_second double precision CHECK (max_per_second > 0),
    tokens         double precision NOT NULL DEFAULT 0,
    tokens_at      timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Jobs of one group run one at a time, in priority then id order (enqueue(..., group=)).
ALTER TABLE {schema}.jobs ADD COLUMN group_key text;

-- A group's next job: the first of its waiting rows in claim order (one index probe).
CREATE INDEX jobs_group_queued_idx
    ON {schema}.jobs (queue, group_key, priority DESC, id)
    WHERE status = 'queued' AND group_key IS NOT NULL;

-- Whether a group has a job out already (at most one row per group is 'running').
CREATE INDEX jobs_group_running_idx
    ON {schema}.jobs (queue, group_key)
    WHERE status = 'running' AND group_key IS NOT NULL;

-- Someone waits for this job to finish (wait_for): the statements that finish it send a
-- notice, so finishes nobody waits for cost no NOTIFY.
ALTER TABLE {schema}.jobs ADD COLUMN awaited boolean NOT NULL DEFAULT false;
