-- The jobs table and the indexes of the claim path.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.
--
-- A row is claimable when status is 'queued' or 'running' and not_visible_until has passed
-- (an expired lease makes a row claimable by itself). 'running' means "was claimed"; whether
-- the lease still holds is not_visible_until > now(). Finished rows say 'succeeded' or
-- 'failed' and carry finished_at.

CREATE TABLE {schema}.jobs (
    id                  bigserial PRIMARY KEY,
    queue               text NOT NULL,
    payload             jsonb NOT NULL,
    status              text NOT NULL DEFAULT 'queued'
                        CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    priority            integer NOT NULL DEFAULT 0,
    attempts            integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts        integer NOT NULL CHECK (max_attempts >= 1),
    claim_seq           bigint NOT NULL DEFAULT 0,
    not_visible_until   timestamptz NOT NULL DEFAULT now(),
    progress            double precision CHECK (progress >= 0 AND progress <= 1),
    last_error          text,
    cancel_requested_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    dedup_key           text,
    worker_id           text,
    CONSTRAINT jobs_finished_at_iff_finished
        CHECK ((status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL))
);

-- The claim path, part 1: waiting rows in claim order. Only unfinished, unleased rows are
-- in it, so neither millions of finished rows nor thousands of leases in flight are walked
-- past by a claim (delayed rows are, until they come due).
CREATE INDEX jobs_claim_queued_idx
    ON {schema}.jobs (queue, priority DESC, id)
    WHERE status = 'queued';

-- The claim path, part 2: leases by expiry. A claim finds expired leases (to re-run them, or
-- to dead-letter them) by a range scan on not_visible_until <= now().
CREATE INDEX jobs_claim_leased_idx
    ON {schema}.jobs (queue, not_visible_until)
    WHERE status = 'running';

-- One unfinished job per (queue, dedup_key); a finished job frees its key.
CREATE UNIQUE INDEX jobs_dedup_idx
    ON {schema}.jobs (queue, dedup_key)
    WHERE dedup_key IS NOT NULL AND status IN ('queued', 'running');

-- Retention: finished rows by age, for pruning.
CREATE INDEX jobs_finished_idx
    ON {schema}.jobs (finished_at)
    WHERE finished_at IS NOT NULL;
