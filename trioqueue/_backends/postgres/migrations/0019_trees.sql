-- Job trees (docs/protocol.rst §22): a job enqueued under a parent (enqueue(...,
-- parent_id=)) holds its parent's id. No edge is written with it: a parent's edges to its
-- children (migration 0018's job_edges) are for its wait for them, and are written when
-- it starts that wait. jobs_parent_idx finds a parent's children in enqueue order; it is
-- partial, so a job without a parent adds no index entry, and the column is never
-- written again after the insert, so renewals stay HOT updates (migration 0006).
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

ALTER TABLE {schema}.jobs ADD COLUMN parent_id bigint;
CREATE INDEX jobs_parent_idx ON {schema}.jobs (parent_id, id) WHERE parent_id IS NOT NULL;
