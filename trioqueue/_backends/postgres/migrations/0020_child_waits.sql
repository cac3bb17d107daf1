-- Job trees, the parent's wait (docs/protocol.rst §22): a parent answering AwaitChildren
-- waits for its unfinished children through migration 0018's edges and waiting count.
--
-- jobs.awaits_children marks a job that has waited for its children, so that only its
-- claims read them back (the continuation's ctx.children); a constant default, not
-- indexed, so adding it rewrites no row and renewals stay HOT updates (migration 0006).
-- The wait's attempt row has outcome `awaiting` (§14). dependency_failure gains the
-- policy 'continue': a failed dependency is settled as a success is (one fewer to wait
-- for), so fail_dependents neither fails such a dependent nor reaches past it; a job it
-- fails that has such dependents settles them itself (its row fires
-- jobs_settle_dependents in turn).
--
-- {schema} is replaced by the quoted, validated schema name, {channel} by the schema's
-- NOTIFY channel, before this file runs.

ALTER TABLE {schema}.jobs ADD COLUMN awaits_children boolean NOT NULL DEFAULT false;

ALTER TABLE {schema}.attempts
    DROP CONSTRAINT attempts_outcome_check,
    ADD CONSTRAINT attempts_outcome_check CHECK (outcome IN
        ('retry', 'failed', 'cancelled', 'released', 'snoozed', 'awaiting', 'lost'));

CREATE OR REPLACE FUNCTION {schema}.fail_dependents(root bigint, reason text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    WITH RECURSIVE reach (id, via, depth) AS (
        SELECT e.dependent_id, e.dependency_id, 1
        FROM {schema}.job_edges AS e
        JOIN {schema}.jobs AS d ON d.id = e.dependent_id
        WHERE e.dependency_id = root AND d.status = 'queued' AND d.waiting > 0
          AND d.dependency_failure IS DISTINCT FROM 'continue'
        UNION
        SELECT e.dependent_id, e.dependency_id, r.depth + 1
        FROM reach AS r
        JOIN {schema}.job_edges AS e ON e.dependency_id = r.id
        JOIN {schema}.jobs AS d ON d.id = e.dependent_id
        WHERE d.status = 'queued' AND d.waiting > 0 AND r.depth < 100000
          AND d.dependency_failure IS DISTINCT FROM 'continue'
    ),
    nearest AS (
        SELECT DISTINCT ON (r.id) r.id, r.via FROM reach AS r ORDER BY r.id, r.depth, r.via
    ),
    failed AS (
        UPDATE {schema}.jobs AS j
        SET status = 'failed', finished_at = now(), waiting = 0,
            cancelled = j.dependency_failure = 'cancel',
            last_error = CASE WHEN j.dependency_failure = 'cancel' THEN 'cancelled: ' ELSE '' END
                || 'dependency ' || n.via || ' '
                || CASE WHEN n.via = root THEN reason ELSE 'failed' END
        FROM nearest AS n
        WHERE j.id = n.id AND j.status = 'queued' AND j.waiting > 0
        RETURNING CASE WHEN j.awaited THEN pg_notify({channel}, 'f:' || j.id || ':' || j.queue) END
    ),
    -- root's dependents under 'continue' count it as finished, as a success would.
    continued AS (
        UPDATE {schema}.jobs AS d
        SET waiting = d.waiting - 1,
            not_visible_until = CASE WHEN d.waiting = 1 THEN now() ELSE d.not_visible_until END
        FROM {schema}.job_edges AS e
        WHERE e.dependency_id = root AND d.id = e.dependent_id AND d.status = 'queued'
          AND d.waiting > 0 AND d.dependency_failure = 'continue'
        RETURNING CASE WHEN d.waiting = 0 THEN pg_notify({channel}, 'a:' || d.queue) END
    )
    SELECT (SELECT count(*) FROM failed) + (SELECT count(*) FROM continued) INTO n;
END
$$;
