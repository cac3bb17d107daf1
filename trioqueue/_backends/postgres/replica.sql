-- Queries run on a read replica (replica.py; docs/postgres.rst, "Read replicas").

-- name: replica_lag
-- How far behind its primary this server is, in seconds, for max_read_lag: 0 on a primary
-- (a DSN of the primary itself, or a promoted replica); 0 on a standby that has replayed
-- all the WAL it received while its WAL receiver runs (it streams, so it has what the
-- primary sent); else the time since the last transaction it replayed, which overstates
-- the lag after a quiet spell on the primary (a read then goes to the primary: the safe
-- side). pg_stat_wal_receiver has a row exactly while a WAL receiver runs, for any role.
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0.0
    WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn()
         AND EXISTS (SELECT FROM pg_stat_wal_receiver) THEN 0.0
    ELSE coalesce(
        extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8,
        'Infinity'::float8
    )
END::float8 AS lag
