-- Snooze (docs/protocol.rst §17): a handler's "run me again after a delay" gives its
-- attempt back; the row counts how often that happened, so that a job cannot snooze for
-- ever unnoticed (WorkerConfig.max_snoozes bounds it). A constant default: adding the
-- column rewrites no table (the default lives in the catalog). Not indexed, so a snooze
-- writes no index entry for it.
--
-- A snoozed attempt leaves an attempt row with outcome `snoozed` (§14), so the outcome
-- check of 0009 admits it: replacing the check scans the attempts table once (to check
-- its rows) under the migration's lock; the jobs table is neither scanned nor rewritten.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

ALTER TABLE {schema}.jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0;

ALTER TABLE {schema}.attempts
    DROP CONSTRAINT attempts_outcome_check,
    ADD CONSTRAINT attempts_outcome_check CHECK (outcome IN
        ('retry', 'failed', 'cancelled', 'released', 'snoozed', 'lost'));
