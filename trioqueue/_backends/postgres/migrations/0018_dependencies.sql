-- Dependencies (docs/protocol.rst §21): a job enqueued with depends_on runs only once every
-- dependency has succeeded, and fails by its policy when one fails for good.
--
-- job_edges holds one row per (dependency, dependent); its primary key serves the lookup
-- of a dependency's dependents, job_edges_dependent_idx the reverse (a job's dependencies).
-- On jobs: waiting counts the dependencies not yet succeeded (a waiting job is queued with
-- not_visible_until 'infinity', so no claim index and no claim statement changes);
-- has_dependents marks a job some other job depends on, so that finishing any other job
-- costs one trigger condition and nothing more; dependency_failure is the policy ('fail'
-- or 'cancel'), NULL for a job without dependencies. Constant defaults: adding the columns
-- rewrites no row. None is indexed, so a renewal stays a HOT update (migration 0006).
--
-- {schema} is replaced by the quoted, validated schema name, {channel} by the schema's
-- NOTIFY channel, before this file runs.

CREATE TABLE {schema}.job_edges (
    dependency_id bigint NOT NULL,
    dependent_id  bigint NOT NULL,
    PRIMARY KEY (dependency_id, dependent_id)
);
CREATE INDEX job_edges_dependent_idx ON {schema}.job_edges (dependent_id);

ALTER TABLE {schema}.jobs
    ADD COLUMN waiting integer NOT NULL DEFAULT 0,
    ADD COLUMN has_dependents boolean NOT NULL DEFAULT false,
    ADD COLUMN dependency_failure text;

-- Why functions (VOLATILE plpgsql), not CTEs of the statements that finish jobs: the
-- dependents must be read AFTER the finished row's lock is held. An enqueue_after locks
-- every dependency's row while it writes its edges; a statement finishing that dependency
-- waits for it, then re-checks only the row it updates. Its CTEs would read job_edges as
-- of the statement's start and miss the edge just committed, stranding the dependent. The
-- statements of a volatile function take a snapshot of their own (READ COMMITTED), after
-- the lock, and so see it.
--
-- A success is settled by the ack statement itself, which calls settle_successes once
-- with every acked row that has dependents, after its update holds their locks: one
-- decrement per dependent and statement (a fan-in of 10,000 acked 50 at a time writes
-- the joining row 200 times, not 10,000, which a row trigger would). A failure for good
-- and a delete come from many statements (fail, release, cancel, the claim's dead
-- letters, delete_job, prune, the operator's bulk actions): row triggers reach all of
-- them, and the transitive dependents, with no change to any; each failure fails its
-- dependents once, so there is nothing to batch.

-- The dependents of the succeeded jobs `ids` (the ack's rows with has_dependents): each
-- waiting one waits for as many dependencies fewer as it has among them; those left
-- waiting for none become claimable now, with one a: notice per queue.
CREATE FUNCTION {schema}.settle_successes(ids bigint[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    WITH met AS (
        SELECT e.dependent_id AS id, count(*) AS n
        FROM {schema}.job_edges AS e
        WHERE e.dependency_id = ANY(ids)
        GROUP BY e.dependent_id
    ),
    woken AS (
        UPDATE {schema}.jobs AS d
        SET waiting = greatest(d.waiting - m.n, 0),
            not_visible_until = CASE WHEN d.waiting <= m.n THEN now() ELSE d.not_visible_until END
        FROM met AS m
        WHERE d.id = m.id AND d.status = 'queued' AND d.waiting > 0
        RETURNING d.queue, d.waiting
    )
    SELECT count(pg_notify({channel}, 'a:' || q.queue)) INTO n
    FROM (SELECT DISTINCT w.queue FROM woken AS w WHERE w.waiting = 0) AS q;
    RETURN n;
END
$$;

-- Every unfinished waiting dependent of `root`, and theirs in turn, fails by its own
-- policy, naming the dependency through which the failure reached it (`via`): `reason` is
-- what befell root ('failed' or 'was deleted'). The rows it finishes fire
-- jobs_settle_dependents in turn, which finds nothing left to do (they are all failed).
CREATE FUNCTION {schema}.fail_dependents(root bigint, reason text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    WITH RECURSIVE reach (id, via, depth) AS (
        SELECT e.dependent_id, e.dependency_id, 1
        FROM {schema}.job_edges AS e
        JOIN {schema}.jobs AS d ON d.id = e.dependent_id
        WHERE e.dependency_id = root AND d.status = 'queued' AND d.waiting > 0
        UNION
        SELECT e.dependent_id, e.dependency_id, r.depth + 1
        FROM reach AS r
        JOIN {schema}.job_edges AS e ON e.dependency_id = r.id
        JOIN {schema}.jobs AS d ON d.id = e.dependent_id
        WHERE d.status = 'queued' AND d.waiting > 0 AND r.depth < 100000
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
    )
    SELECT count(*) INTO n FROM failed;
END
$$;

-- A job with dependents failed for good: its dependents fail (fail_dependents).
CREATE FUNCTION {schema}.settle_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {schema}.fail_dependents(NEW.id, 'failed');
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_settle_dependents
    AFTER UPDATE OF status ON {schema}.jobs
    FOR EACH ROW
    WHEN (NEW.has_dependents AND OLD.status IN ('queued', 'running') AND NEW.status = 'failed')
    EXECUTE FUNCTION {schema}.settle_dependents();

-- A dependency deleted before it finished can never succeed: its dependents fail. Its
-- edges go with it (those of a finished one too: its dependents need them no more).
CREATE FUNCTION {schema}.forget_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('queued', 'running') THEN
        PERFORM {schema}.fail_dependents(OLD.id, 'was deleted');
    END IF;
    DELETE FROM {schema}.job_edges AS e WHERE e.dependency_id = OLD.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_forget_dependents
    AFTER DELETE ON {schema}.jobs
    FOR EACH ROW
    WHEN (OLD.has_dependents)
    EXECUTE FUNCTION {schema}.forget_dependents();

-- A failed dependent put back (retry, a redrive) waits again for its dependencies not yet
-- succeeded, and is left failed (the update skipped) while one of them is failed. Their
-- rows are locked first (FOR SHARE), so a statement finishing one of them either commits
-- before the count below (which then sees it) or waits for this one, and then its trigger
-- sees this row queued again. A deleted dependency counts as met: an unfinished one
-- failed this job when it went, and retention deletes only finished jobs.
CREATE FUNCTION {schema}.recheck_dependencies() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    unmet bigint;
    broken boolean;
BEGIN
    PERFORM 1 FROM {schema}.job_edges AS e JOIN {schema}.jobs AS d ON d.id = e.dependency_id
    WHERE e.dependent_id = NEW.id
    ORDER BY d.id
    FOR SHARE OF d;
    SELECT count(*) FILTER (WHERE d.status <> 'succeeded'), coalesce(bool_or(d.status = 'failed'), false)
    INTO unmet, broken
    FROM {schema}.job_edges AS e JOIN {schema}.jobs AS d ON d.id = e.dependency_id
    WHERE e.dependent_id = NEW.id;
    IF broken THEN
        RETURN NULL;
    END IF;
    NEW.waiting := unmet;
    IF unmet > 0 THEN
        NEW.not_visible_until := 'infinity';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER jobs_recheck_dependencies
    BEFORE UPDATE OF status ON {schema}.jobs
    FOR EACH ROW
    WHEN (OLD.status = 'failed' AND NEW.status = 'queued' AND NEW.dependency_failure IS NOT NULL)
    EXECUTE FUNCTION {schema}.recheck_dependencies();
