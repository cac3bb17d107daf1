-- Renewals on HOT updates (docs/performance.rst, "Renewals"): a renewal must change no
-- indexed column, so that PostgreSQL writes the row's new version on its own page and no
-- index entry (a heap-only tuple), and pages need room for that new version.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- A lower bound of a running row's lease: lease_floor <= not_visible_until, always. The
-- claim sets both to the new lease; a renewal moves not_visible_until and leaves the floor,
-- except when the floor is within a quarter of a lease of passing (then it lifts it to the
-- new lease): a lease in flight costs one index entry per 3/4 visibility_timeout, not one
-- per heartbeat. Rows never claimed have '-infinity'.
ALTER TABLE {schema}.jobs ADD COLUMN lease_floor timestamptz NOT NULL DEFAULT '-infinity';
UPDATE {schema}.jobs SET lease_floor = not_visible_until WHERE status = 'running';

-- The claim path, part 2: expired leases are found by a range scan on lease_floor <= now()
-- and checked against not_visible_until (a filter). This replaces the index on
-- (queue, not_visible_until), which every renewal had to write.
CREATE INDEX jobs_claim_leased_floor_idx
    ON {schema}.jobs (queue, lease_floor)
    WHERE status = 'running';
DROP INDEX {schema}.jobs_claim_leased_idx;

-- Room on every page for renewed versions of its rows: a renewal needs a page's old and new
-- versions side by side until the next one prunes the old, so a page whose rows are all
-- renewed together stays HOT only while they fill about half of it. Inserts leave 40% of
-- each new page free; claims, acks and renewals use it (existing pages get it as their
-- rows are finished and pruned). Measured in docs/performance.rst: 90 gave 40% HOT
-- renewals when every row was in flight, 80 68%, 70 86%, 60 96%.
ALTER TABLE {schema}.jobs SET (fillfactor = 60);
