-- The retention batch's index carries each row's id (docs/protocol.rst §15, "Bounded
-- batches"). A batch reads up to its limit of rows for each (queue, status) with rows past
-- their policy, to delete the oldest of them across queues: with 20 queues, about 20,000
-- index entries for a batch of 1,000. With the id in the index those reads are index-only
-- scans (old finished rows are on all-visible pages once vacuumed), and the heap is read
-- only for the rows deleted. The index is built again: writes to jobs wait while it is
-- (docs/postgres.rst, "Retention": upgrade a big table at a quiet moment).
DROP INDEX {schema}.jobs_retention_idx;
CREATE INDEX jobs_retention_idx
    ON {schema}.jobs (queue, status, finished_at) INCLUDE (id)
    WHERE finished_at IS NOT NULL;
