-- A job's result: what the handler of its last successful attempt returned, as JSON; NULL
-- when it returned nothing (or no attempt has succeeded). Written by the fenced ack that
-- finishes the attempt, so a stale ack stores nothing.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

ALTER TABLE {schema}.jobs ADD COLUMN result jsonb;
