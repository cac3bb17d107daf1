-- Attempts that end without an outcome (docs/protocol.rst §13): a worker that died mid-job
-- wrote nothing, and the claim that takes the row again after its lease lapsed keeps count.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- lapses: attempts in a row, up to the current one, that ended without an outcome (the
-- claim adds one when it takes a running row whose lease lapsed, and sets 0 when it takes
-- a queued row). alone: the current attempt was claimed to run alone, with nothing beside
-- it in its pool; a claim that finds such a row's lease lapsed parks the row. Neither is
-- indexed: the claim reads them only on the rows its indexes found. Constant defaults, so
-- adding them rewrites no row.
ALTER TABLE {schema}.jobs
    ADD COLUMN lapses integer NOT NULL DEFAULT 0,
    ADD COLUMN alone boolean NOT NULL DEFAULT false;
