-- Dead letters (docs/protocol.rst §19): the failed rows alone, newest first, for the
-- dead-letter list, its summary and a redrive's batches (dead_letters.sql). Partial, so
-- it holds only the jobs that failed for good: a row enters it once, when it fails, and
-- no claim, renewal or ack of a live job writes an entry to it.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.
CREATE INDEX jobs_dead_idx ON {schema}.jobs (id) WHERE status = 'failed';
