-- Attempt history (docs/protocol.rst §14): one row per attempt that did not succeed in
-- `attempts`, written by the statement that ended the attempt (or by the claim that took a
-- lapsed one over); a succeeded attempt is the job's row itself, which the ack finishes, so
-- the hot path inserts no row. The view `attempt_rows` reads both as one table.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- One attempt that did not succeed (a succeeded one is its job's row): the key (job_id, claim_seq) is §14's "one claim, at most one row", and
-- the statements' ON CONFLICT DO NOTHING relies on it; its leading column also serves
-- the cascade from jobs (below). `queue` is the job's, copied so that the per-queue window
-- reads (queue_timings, attempt_history) use attempts_finished_idx without joining jobs.
CREATE TABLE {schema}.attempts (
    job_id       bigint NOT NULL,
    claim_seq    bigint NOT NULL,
    attempt      integer NOT NULL,
    queue        text NOT NULL,
    outcome      text NOT NULL CHECK (outcome IN
                     ('retry', 'failed', 'cancelled', 'released', 'lost')),
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

-- Attempts go with their job, whatever deletes it (delete_job, prune, an operator's own
-- DELETE): one trigger per DELETE statement, which deletes the attempts of every job the
-- statement deleted. Not a foreign key: its check is a trigger call per attempt row
-- inserted, on the hot path (an ack of 50 jobs spent a quarter of its time in it, more
-- than the insert itself); an attempt row is only ever inserted by the statement that
-- updated, and so locked, its job's row, so it cannot name a job that is gone.
CREATE FUNCTION {schema}.delete_attempts_of_deleted_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.attempts AS a USING deleted_jobs AS d WHERE a.job_id = d.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_delete_attempts
    AFTER DELETE ON {schema}.jobs
    REFERENCING OLD TABLE AS deleted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.delete_attempts_of_deleted_jobs();

-- What the claim and the ack keep on the job's row for its attempt: the claim writes
-- claimed_at, wait_seconds and host (its pool's, as it registered) and clears started_at and
-- run_seconds; the ack writes those two (a succeeded attempt has no row of its own). The
-- enqueue stores trace_context, and a cancellation is told apart from a failure (cancelled).
-- None is indexed: the claim and the ack write them, which must cost those updates no
-- index entry (they move status anyway), and a renewal's update must stay HOT (migration
-- 0006); the cancelled filter reads rows the status filter found anyway. Constant defaults, so adding them rewrites no row. (Who finished a job needs no
-- column: worker_id stays on a finished row until a retry clears it.)
ALTER TABLE {schema}.jobs
    ADD COLUMN claimed_at timestamptz,
    ADD COLUMN wait_seconds float8,
    ADD COLUMN started_at timestamptz,
    ADD COLUMN run_seconds float8,
    ADD COLUMN host text,
    ADD COLUMN cancelled boolean NOT NULL DEFAULT false,
    ADD COLUMN trace_context jsonb;

-- Every attempt as one row, with the attempts table's columns: its rows, and one for each
-- succeeded job claimed since this migration (claimed_at set; a job that succeeded before
-- it has no recorded attempt, as the others have none). For operators' SQL, and for the
-- reads of queries.sql: a filter on job_id or finished_at reaches both sides' indexes.
CREATE VIEW {schema}.attempt_rows AS
SELECT a.job_id, a.claim_seq, a.attempt, a.queue, a.outcome, a.worker_id, a.host,
       a.claimed_at, a.started_at, a.finished_at, a.run_seconds, a.wait_seconds,
       a.error_type, a.error, a.traceback
FROM {schema}.attempts AS a
UNION ALL
SELECT j.id, j.claim_seq, j.attempts, j.queue, 'succeeded'::text, j.worker_id, j.host,
       j.claimed_at, j.started_at, j.finished_at, j.run_seconds, j.wait_seconds,
       NULL::text, NULL::text, NULL::text
FROM {schema}.jobs AS j
WHERE j.status = 'succeeded' AND j.claimed_at IS NOT NULL;

-- Existing cancellations: every message a cancelled job gets begins with 'cancelled'.
UPDATE {schema}.jobs SET cancelled = true
WHERE status = 'failed' AND starts_with(last_error, 'cancelled');
