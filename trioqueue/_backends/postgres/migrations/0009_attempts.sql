-- Attempt history (docs/protocol.rst §14): one row per attempt in `attempts`, written by the
-- statement that ended the attempt (or by the claim that took a lapsed one over), and what
-- the claim keeps on the job's row for it.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- One attempt: the key (job_id, claim_seq) is §14's "one claim, at most one row", and
-- the statements' ON CONFLICT DO NOTHING relies on it; its leading column also serves
-- the cascade from jobs. `queue` is the job's, copied so that the per-queue window reads
-- (queue_timings, attempt_history) use attempts_finished_idx without joining jobs.
CREATE TABLE {schema}.attempts (
    job_id       bigint NOT NULL REFERENCES {schema}.jobs (id) ON DELETE CASCADE,
    claim_seq    bigint NOT NULL,
    attempt      integer NOT NULL,
    queue        text NOT NULL,
    outcome      text NOT NULL CHECK (outcome IN
                     ('succeeded', 'retry', 'failed', 'cancelled', 'released', 'lost')),
    worker_id    text,
    host         text,
    claimed_at   timestamptz NOT NULL,
    started_at   timestamptz,
    finished_at  timestamptz NOT NULL,
    run_seconds  float8,
    wait_seconds float8,
    error_type   text,
    error        text,
    traceback    text,
    PRIMARY KEY (job_id, claim_seq)
);
CREATE INDEX attempts_finished_idx ON {schema}.attempts (queue, finished_at);

-- What the claim writes on the job's row (claimed_at, wait_seconds) and what the enqueue
-- stores (trace_context), with a cancellation told apart from a failure (cancelled). None
-- is indexed: the claim writes the first two, and a renewal's HOT update (migration 0006)
-- must stay possible; the cancelled filter reads rows the status filter found anyway.
-- Constant defaults, so adding them rewrites no row. (Who finished a job needs no column:
-- worker_id stays on a finished row until a retry clears it.)
ALTER TABLE {schema}.jobs
    ADD COLUMN claimed_at timestamptz,
    ADD COLUMN wait_seconds float8,
    ADD COLUMN cancelled boolean NOT NULL DEFAULT false,
    ADD COLUMN trace_context jsonb;

-- Existing cancellations: every message a cancelled job gets begins with 'cancelled'.
UPDATE {schema}.jobs SET cancelled = true
WHERE status = 'failed' AND starts_with(last_error, 'cancelled');
