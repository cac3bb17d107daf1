-- Retention and the maintainer lease (docs/protocol.rst §15): how long finished jobs and
-- audit entries are kept, and which pool prunes them.
--
-- {schema} is replaced by the quoted, validated schema name before this file runs.

-- A queue's own policy, whole: each keep-time is seconds after finished_at, NULL keeps for
-- ever (a NULL here does not fall back to the default).
CREATE TABLE {schema}.retention (
    queue     text PRIMARY KEY,
    succeeded float8 CHECK (succeeded > 0),
    failed    float8 CHECK (failed > 0)
);

-- One row: the default policy, for every queue without its own, and the audit log's
-- keep-time. The defaults are those of trioqueue._operator_types (DEFAULT_KEEP_*): a
-- schema migrated by this release prunes finished jobs by itself once a maintainer runs.
CREATE TABLE {schema}.retention_settings (
    id                boolean PRIMARY KEY DEFAULT true CHECK (id),
    default_succeeded float8 CHECK (default_succeeded > 0),
    default_failed    float8 CHECK (default_failed > 0),
    audit             float8 CHECK (audit > 0)
);
INSERT INTO {schema}.retention_settings (default_succeeded, default_failed, audit)
VALUES (7 * 86400, 30 * 86400, 90 * 86400);

-- The maintainer lease: one row, taken with the lease protocol's rules (§1, §15). holder
-- is NULL until the lease is first claimed; seq is its fence, +1 per claim.
CREATE TABLE {schema}.maintainer (
    id                boolean PRIMARY KEY DEFAULT true CHECK (id),
    holder            text,
    seq               bigint NOT NULL DEFAULT 0,
    acquired_at       timestamptz,
    not_visible_until timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO {schema}.maintainer DEFAULT VALUES;

-- Pruning by policy, per (queue, status): each batch starts at the oldest finished row of
-- each queue and status, so rows a longer policy keeps (or a keep-for-ever) are never
-- walked past, and the queues are enumerated by a loose index scan of its first column.
-- jobs_finished_idx stays: finished_history, list_jobs' finished_at sorts and prune read
-- finished rows across queues by age, which this index cannot give without a skip scan.
-- It costs each ack one more index entry (docs/postgres.rst, "Retention").
CREATE INDEX jobs_retention_idx
    ON {schema}.jobs (queue, status, finished_at)
    WHERE finished_at IS NOT NULL;

-- Audit entries by age, for their retention (appended in id order, but at is what the
-- policy reads; without it a batch with nothing to delete would read every entry).
CREATE INDEX audit_log_at_idx ON {schema}.audit_log (at);
