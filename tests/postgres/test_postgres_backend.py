"""The PostgreSQL backend: the conformance suite, then what only PostgreSQL has.

Each test runs in a schema of its own (``postgres_schema``, tests/conftest.py) on a real
server, on trio's real clock.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import trio

from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._backends.postgres.sql import MIGRATIONS, QUERIES, render
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._errors import BackendError
from trioqueue._types import Ack, Claimed, Failure, Notice, NoticeKind, Recorded, Release
from trioqueue.testing import BackendConformance

from .._postgres_harness import jobs_table, wait_for_lock_wait
from ..conftest import Janitor

pytestmark = pytest.mark.postgres


class TestPostgresConformance(BackendConformance):
    @pytest.fixture
    async def backend(
        self, postgres_dsn: str, postgres_schema: str
    ) -> AsyncIterator[PostgresBackend]:
        async with open_postgres(postgres_dsn, schema=postgres_schema) as backend:
            await backend.migrate()  # already done: this only checks the applied migrations
            yield backend


# -- PostgreSQL only ------------------------------------------------------------------------

Q = "pg"
V = 60.0


async def claim(backend: PostgresBackend, limit: int = 10, worker: str = "w") -> list[Claimed]:
    return await backend.claim(Q, limit=limit, worker_id=worker, visibility_timeout=V)


def item(claimed: Claimed, progress: float | None = None) -> RenewItem:
    return RenewItem(claimed.job.id, claimed.job.claim_seq, progress)


async def row(backend: PostgresBackend, job_id: int) -> Any:
    async with backend.acquire() as connection:
        return await connection.fetchrow(
            f"SELECT *, extract(epoch FROM not_visible_until)::float8 AS lease_until "
            f"FROM {jobs_table(backend)} WHERE id = $1",
            job_id,
        )


# -- schema names and migrations ------------------------------------------------------------

HOSTILE_SCHEMAS = [
    pytest.param('x"; DROP TABLE jobs; --', id="injection"),
    pytest.param("Trioqueue", id="upper-case"),
    pytest.param("", id="empty"),
    pytest.param("1abc", id="leading-digit"),
    pytest.param("tq-test", id="dash"),
    pytest.param("a" * 64, id="too-long"),
    pytest.param("pg_catalog", id="reserved-prefix"),
    pytest.param("tq\x00", id="nul"),
    pytest.param("tq\n", id="trailing-newline"),
    pytest.param("é", id="non-ascii"),
]


@pytest.mark.parametrize("schema", HOSTILE_SCHEMAS)
async def test_hostile_schema_name_is_refused_before_any_sql(schema: str) -> None:
    # Port 1 refuses connections: reaching the network would raise BackendError instead.
    with pytest.raises(ValueError, match="schema"):
        async with open_postgres("postgresql://postgres@127.0.0.1:1/none", schema=schema):
            pass
    with pytest.raises(ValueError, match="schema"):
        render(QUERIES["claim"], schema)


async def test_schema_of_wrong_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="schema"):
        async with open_postgres("postgresql://postgres@127.0.0.1:1/none", schema=b"tq"):  # type: ignore[arg-type]
            pass


async def test_schema_name_is_quoted(postgres_dsn: str, postgres_janitor: Janitor) -> None:
    """A reserved word is a valid schema name only because every use of it is quoted."""
    schema = "select"
    try:
        async with open_postgres(postgres_dsn, schema=schema) as backend:
            await backend.migrate()
            job_id = await backend.enqueue(Q, {"ok": True})
            [claimed] = await claim(backend)
            assert claimed.job.id == job_id
            assert await backend.ack([Ack(job_id, claimed.job.claim_seq)]) == [True]
    finally:
        postgres_janitor.drop(schema)


async def test_migrate_is_idempotent_and_safe_to_run_concurrently(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async with open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        async with trio.open_nursery() as nursery:  # concurrent migrators take turns
            for _ in range(3):
                nursery.start_soon(backend.migrate)
        await backend.migrate()
        async with backend.acquire() as connection:
            applied = await connection.fetch(
                f'SELECT version, name FROM "{postgres_schema}".schema_migrations'
            )
        assert [(r["version"], r["name"]) for r in applied] == [
            (m.version, m.name) for m in MIGRATIONS
        ]
        assert backend.statistics()["calls"]["migrate"] == 4


async def test_edited_migration_is_detected(backend: PostgresBackend) -> None:
    async with backend.acquire() as connection:
        await connection.execute(
            f'UPDATE "{backend.schema}".schema_migrations SET checksum = $1', "edited"
        )
    with pytest.raises(BackendError, match="changed after it was applied"):
        await backend.migrate()


#: What a fresh migration creates, with the schema name written as ``{schema}``. Update it
#: together with every new migration file; the test below says what changed.
SCHEMA_SNAPSHOT: dict[str, list[Any]] = {
    "columns": [
        ("attempt_rows", "job_id", "bigint", "YES", None),  # 0009 (a view)
        ("attempt_rows", "claim_seq", "bigint", "YES", None),  # 0009 (a view)
        ("attempt_rows", "attempt", "integer", "YES", None),  # 0009 (a view)
        ("attempt_rows", "queue", "text", "YES", None),  # 0009 (a view)
        ("attempt_rows", "outcome", "text", "YES", None),  # 0009 (a view)
        ("attempt_rows", "worker_id", "text", "YES", None),  # 0009 (a view)
        ("attempt_rows", "host", "text", "YES", None),  # 0009 (a view)
        ("attempt_rows", "claimed_at", "timestamp with time zone", "YES", None),  # 0009 (a view)
        ("attempt_rows", "started_at", "timestamp with time zone", "YES", None),  # 0009 (a view)
        ("attempt_rows", "finished_at", "timestamp with time zone", "YES", None),  # 0009 (a view)
        ("attempt_rows", "run_seconds", "double precision", "YES", None),  # 0009 (a view)
        ("attempt_rows", "wait_seconds", "double precision", "YES", None),  # 0009 (a view)
        ("attempt_rows", "error_type", "text", "YES", None),  # 0009 (a view)
        ("attempt_rows", "error", "text", "YES", None),  # 0009 (a view)
        ("attempt_rows", "traceback", "text", "YES", None),  # 0009 (a view)
        ("attempts", "job_id", "bigint", "NO", None),  # 0009
        ("attempts", "claim_seq", "bigint", "NO", None),  # 0009
        ("attempts", "attempt", "integer", "NO", None),  # 0009
        ("attempts", "queue", "text", "NO", None),  # 0009
        ("attempts", "outcome", "text", "NO", None),  # 0009
        ("attempts", "worker_id", "text", "YES", None),  # 0009
        ("attempts", "host", "text", "YES", None),  # 0009
        ("attempts", "claimed_at", "timestamp with time zone", "NO", None),  # 0009
        ("attempts", "started_at", "timestamp with time zone", "YES", None),  # 0009
        ("attempts", "finished_at", "timestamp with time zone", "NO", None),  # 0009
        ("attempts", "run_seconds", "double precision", "YES", None),  # 0009
        ("attempts", "wait_seconds", "double precision", "YES", None),  # 0009
        ("attempts", "error_type", "text", "YES", None),  # 0009
        ("attempts", "error", "text", "YES", None),  # 0009
        ("attempts", "traceback", "text", "YES", None),  # 0009
        ("audit_log", "id", "bigint", "NO", None),  # 0010 (an identity column)
        ("audit_log", "at", "timestamp with time zone", "NO", "now()"),  # 0010
        ("audit_log", "action", "text", "NO", None),  # 0010
        ("audit_log", "target", "text", "NO", None),  # 0010
        ("audit_log", "session", "text", "NO", None),  # 0010
        ("audit_log", "detail", "jsonb", "NO", None),  # 0010
        ("job_edges", "dependency_id", "bigint", "NO", None),  # 0018
        ("job_edges", "dependent_id", "bigint", "NO", None),  # 0018
        ("jobs", "id", "bigint", "NO", "nextval('{schema}.jobs_id_seq'::regclass)"),
        ("jobs", "queue", "text", "NO", None),
        ("jobs", "payload", "jsonb", "NO", None),
        ("jobs", "status", "text", "NO", "'queued'::text"),
        ("jobs", "priority", "integer", "NO", "0"),
        ("jobs", "attempts", "integer", "NO", "0"),
        ("jobs", "max_attempts", "integer", "NO", None),
        ("jobs", "claim_seq", "bigint", "NO", "0"),
        ("jobs", "not_visible_until", "timestamp with time zone", "NO", "now()"),
        ("jobs", "progress", "double precision", "YES", None),
        ("jobs", "last_error", "text", "YES", None),
        ("jobs", "cancel_requested_at", "timestamp with time zone", "YES", None),
        ("jobs", "created_at", "timestamp with time zone", "NO", "now()"),
        ("jobs", "finished_at", "timestamp with time zone", "YES", None),
        ("jobs", "dedup_key", "text", "YES", None),
        ("jobs", "worker_id", "text", "YES", None),
        ("jobs", "last_renewed_at", "timestamp with time zone", "YES", None),  # 0002
        ("jobs", "cancel_acknowledged_at", "timestamp with time zone", "YES", None),  # 0002
        ("jobs", "result", "jsonb", "YES", None),  # 0003
        ("jobs", "group_key", "text", "YES", None),  # 0004
        ("jobs", "awaited", "boolean", "NO", "false"),  # 0004
        ("jobs", "schedule_name", "text", "YES", None),  # 0005
        ("jobs", "schedule_tick", "timestamp with time zone", "YES", None),  # 0005
        (
            "jobs",
            "lease_floor",
            "timestamp with time zone",
            "NO",
            "'-infinity'::timestamp with time zone",
        ),  # 0006
        ("jobs", "lapses", "integer", "NO", "0"),  # 0007
        ("jobs", "alone", "boolean", "NO", "false"),  # 0007
        ("jobs", "claimed_at", "timestamp with time zone", "YES", None),  # 0009
        ("jobs", "wait_seconds", "double precision", "YES", None),  # 0009
        ("jobs", "started_at", "timestamp with time zone", "YES", None),  # 0009
        ("jobs", "run_seconds", "double precision", "YES", None),  # 0009
        ("jobs", "host", "text", "YES", None),  # 0009
        ("jobs", "cancelled", "boolean", "NO", "false"),  # 0009
        ("jobs", "trace_context", "jsonb", "YES", None),  # 0009
        ("jobs", "checkpoint", "jsonb", "YES", None),  # 0016
        ("jobs", "checkpointed_at", "timestamp with time zone", "YES", None),  # 0016
        ("jobs", "snoozes", "integer", "NO", "0"),  # 0017
        ("jobs", "waiting", "integer", "NO", "0"),  # 0018
        ("jobs", "has_dependents", "boolean", "NO", "false"),  # 0018
        ("jobs", "dependency_failure", "text", "YES", None),  # 0018
        ("jobs", "parent_id", "bigint", "YES", None),  # 0019
        ("jobs", "awaits_children", "boolean", "NO", "false"),  # 0020
        ("maintainer", "id", "boolean", "NO", "true"),  # 0011
        ("maintainer", "holder", "text", "YES", None),  # 0011
        ("maintainer", "seq", "bigint", "NO", "0"),  # 0011
        ("maintainer", "acquired_at", "timestamp with time zone", "YES", None),  # 0011
        (
            "maintainer",
            "not_visible_until",
            "timestamp with time zone",
            "NO",
            "'-infinity'::timestamp with time zone",
        ),  # 0011
        ("queues", "queue", "text", "NO", None),
        ("queues", "paused", "boolean", "NO", "false"),
        ("queues", "max_running", "integer", "YES", None),
        ("queues", "max_per_second", "double precision", "YES", None),
        ("queues", "tokens", "double precision", "NO", "0"),
        ("queues", "tokens_at", "timestamp with time zone", "NO", "now()"),
        ("queues", "updated_at", "timestamp with time zone", "NO", "now()"),
        ("retention", "queue", "text", "NO", None),  # 0011
        ("retention", "succeeded", "double precision", "YES", None),  # 0011
        ("retention", "failed", "double precision", "YES", None),  # 0011
        ("retention_settings", "id", "boolean", "NO", "true"),  # 0011
        ("retention_settings", "default_succeeded", "double precision", "YES", None),  # 0011
        ("retention_settings", "default_failed", "double precision", "YES", None),  # 0011
        ("retention_settings", "audit", "double precision", "YES", None),  # 0011
        ("schedules", "name", "text", "NO", None),
        ("schedules", "queue", "text", "NO", None),
        ("schedules", "cron", "text", "NO", None),
        ("schedules", "timezone", "text", "NO", None),
        ("schedules", "payload", "jsonb", "NO", None),
        ("schedules", "priority", "integer", "NO", "0"),
        ("schedules", "max_attempts", "integer", "NO", None),
        ("schedules", "next_run_at", "timestamp with time zone", "NO", None),
        ("schedules", "last_run_at", "timestamp with time zone", "YES", None),
        ("schedules", "created_at", "timestamp with time zone", "NO", "now()"),
        ("schedules", "updated_at", "timestamp with time zone", "NO", "now()"),
        ("schedules", "enabled", "boolean", "NO", "true"),  # 0010
        ("schema_migrations", "version", "integer", "NO", None),
        ("schema_migrations", "name", "text", "NO", None),
        ("schema_migrations", "checksum", "text", "NO", None),
        ("schema_migrations", "applied_at", "timestamp with time zone", "NO", "now()"),
        ("workers", "worker_id", "text", "NO", None),
        ("workers", "host", "text", "NO", None),
        ("workers", "pid", "integer", "NO", None),
        ("workers", "queue", "text", "NO", None),
        ("workers", "concurrency", "integer", "NO", None),
        ("workers", "heartbeat_interval", "double precision", "NO", None),
        ("workers", "in_flight", "integer", "NO", "0"),
        ("workers", "abandoned_renewals", "bigint", "NO", "0"),
        ("workers", "started_at", "timestamp with time zone", "NO", "now()"),
        ("workers", "last_beat_at", "timestamp with time zone", "NO", "now()"),
        ("workers", "clock_skew", "double precision", "YES", None),  # 0007
        ("workers", "clock_verdict", "text", "YES", None),  # 0007
    ],
    "indexes": [
        "CREATE INDEX attempts_finished_idx ON {schema}.attempts USING btree (queue, finished_at)",
        "CREATE UNIQUE INDEX attempts_pkey ON {schema}.attempts USING btree (job_id, claim_seq)",
        "CREATE INDEX audit_log_action_idx ON {schema}.audit_log USING btree (action, id)",
        "CREATE INDEX audit_log_at_idx ON {schema}.audit_log USING btree (at)",  # 0011
        "CREATE UNIQUE INDEX audit_log_pkey ON {schema}.audit_log USING btree (id)",
        "CREATE INDEX job_edges_dependent_idx ON {schema}.job_edges USING btree (dependent_id)",  # 0018
        "CREATE UNIQUE INDEX job_edges_pkey ON {schema}.job_edges USING btree (dependency_id, dependent_id)",  # 0018
        "CREATE INDEX jobs_claim_leased_floor_idx ON {schema}.jobs USING btree (queue, lease_floor) WHERE (status = 'running'::text)",
        "CREATE INDEX jobs_claim_queued_idx ON {schema}.jobs USING btree (queue, priority DESC, id) WHERE (status = 'queued'::text)",
        "CREATE INDEX jobs_dead_idx ON {schema}.jobs USING btree (id) WHERE (status = 'failed'::text)",  # 0015
        "CREATE UNIQUE INDEX jobs_dedup_idx ON {schema}.jobs USING btree (queue, dedup_key) WHERE ((dedup_key IS NOT NULL) AND (status = ANY (ARRAY['queued'::text, 'running'::text])))",
        "CREATE INDEX jobs_finished_idx ON {schema}.jobs USING btree (finished_at) WHERE (finished_at IS NOT NULL)",
        "CREATE INDEX jobs_group_queued_idx ON {schema}.jobs USING btree (queue, group_key, priority DESC, id) WHERE ((status = 'queued'::text) AND (group_key IS NOT NULL))",
        "CREATE INDEX jobs_group_running_idx ON {schema}.jobs USING btree (queue, group_key) WHERE ((status = 'running'::text) AND (group_key IS NOT NULL))",
        "CREATE INDEX jobs_parent_idx ON {schema}.jobs USING btree (parent_id, id) WHERE (parent_id IS NOT NULL)",  # 0019
        "CREATE UNIQUE INDEX jobs_pkey ON {schema}.jobs USING btree (id)",
        "CREATE INDEX jobs_retention_idx ON {schema}.jobs USING btree (queue, status, finished_at) INCLUDE (id) WHERE (finished_at IS NOT NULL)",  # 0011, 0014
        "CREATE UNIQUE INDEX jobs_schedule_tick_idx ON {schema}.jobs USING btree (schedule_name, schedule_tick) WHERE (schedule_name IS NOT NULL)",
        "CREATE UNIQUE INDEX maintainer_pkey ON {schema}.maintainer USING btree (id)",  # 0011
        "CREATE UNIQUE INDEX queues_pkey ON {schema}.queues USING btree (queue)",
        "CREATE UNIQUE INDEX retention_pkey ON {schema}.retention USING btree (queue)",  # 0011
        "CREATE UNIQUE INDEX retention_settings_pkey ON {schema}.retention_settings USING btree (id)",  # 0011
        "CREATE INDEX schedules_next_run_idx ON {schema}.schedules USING btree (next_run_at)",
        "CREATE UNIQUE INDEX schedules_pkey ON {schema}.schedules USING btree (name)",
        "CREATE UNIQUE INDEX schema_migrations_pkey ON {schema}.schema_migrations USING btree (version)",
        "CREATE UNIQUE INDEX workers_pkey ON {schema}.workers USING btree (worker_id)",
    ],
    "storage": [
        (
            "jobs",
            [
                "fillfactor=60",  # 0006
                "autovacuum_vacuum_scale_factor=0.01",  # 0012
                "autovacuum_vacuum_insert_scale_factor=0.01",  # 0012
                "autovacuum_analyze_scale_factor=0.01",  # 0012
            ],
        )
    ],
    "constraints": sorted(
        [
            (
                "attempts",
                "CHECK ((outcome = ANY (ARRAY['retry'::text, 'failed'::text, 'cancelled'::text, 'released'::text, 'snoozed'::text, 'awaiting'::text, 'lost'::text])))",  # 0020
            ),
            ("attempts", "PRIMARY KEY (job_id, claim_seq)"),
            ("audit_log", "PRIMARY KEY (id)"),
            ("job_edges", "PRIMARY KEY (dependency_id, dependent_id)"),  # 0018
            ("jobs", "CHECK ((attempts >= 0))"),
            (
                "jobs",
                "CHECK (((status = ANY (ARRAY['succeeded'::text, 'failed'::text])) = (finished_at IS NOT NULL)))",
            ),
            ("jobs", "CHECK ((max_attempts >= 1))"),
            (
                "jobs",
                "CHECK (((progress >= (0)::double precision) AND (progress <= (1)::double precision)))",
            ),
            (
                "jobs",
                "CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'succeeded'::text, 'failed'::text])))",
            ),
            ("jobs", "PRIMARY KEY (id)"),
            ("queues", "CHECK ((max_per_second > (0)::double precision))"),
            ("queues", "CHECK ((max_running >= 1))"),
            ("queues", "PRIMARY KEY (queue)"),
            ("schedules", "CHECK ((max_attempts >= 1))"),
            ("schedules", "PRIMARY KEY (name)"),
            ("schema_migrations", "PRIMARY KEY (version)"),
            ("workers", "CHECK ((abandoned_renewals >= 0))"),
            ("workers", "CHECK ((concurrency >= 1))"),
            ("workers", "CHECK ((heartbeat_interval > (0)::double precision))"),
            ("workers", "CHECK ((in_flight >= 0))"),
            ("workers", "CHECK ((pid >= 0))"),
            ("workers", "PRIMARY KEY (worker_id)"),
            ("maintainer", "CHECK (id)"),  # 0011
            ("maintainer", "PRIMARY KEY (id)"),  # 0011
            ("retention", "CHECK ((failed > (0)::double precision))"),  # 0011
            ("retention", "CHECK ((succeeded > (0)::double precision))"),  # 0011
            ("retention", "PRIMARY KEY (queue)"),  # 0011
            ("retention_settings", "CHECK ((audit > (0)::double precision))"),  # 0011
            ("retention_settings", "CHECK ((default_failed > (0)::double precision))"),  # 0011
            ("retention_settings", "CHECK ((default_succeeded > (0)::double precision))"),  # 0011
            ("retention_settings", "CHECK (id)"),  # 0011
            ("retention_settings", "PRIMARY KEY (id)"),  # 0011
        ]
    ),
}


async def schema_snapshot(backend: PostgresBackend) -> dict[str, list[Any]]:
    schema = backend.schema
    async with backend.acquire() as connection:
        columns = await connection.fetch(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = $1 "
            "ORDER BY table_name, ordinal_position",
            schema,
        )
        indexes = await connection.fetch(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname", schema
        )
        constraints = await connection.fetch(
            "SELECT c.conrelid::regclass::text AS table_name, pg_get_constraintdef(c.oid) AS def "
            "FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
            "WHERE n.nspname = $1 ORDER BY 1, 2",
            schema,
        )

        storage = await connection.fetch(
            "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.reloptions IS NOT NULL "
            "ORDER BY 1",
            schema,
        )

    def generic(text: str | None) -> str | None:
        return None if text is None else text.replace(schema, "{schema}")

    return {
        "columns": [tuple(generic(v) if isinstance(v, str) else v for v in c) for c in columns],
        "indexes": [generic(i["indexdef"]) for i in indexes],
        "storage": [(s["relname"], s["reloptions"]) for s in storage],
        # (a foreign key names its table with the schema: 0009's attempts -> jobs)
        "constraints": sorted(
            (c["table_name"].rpartition(".")[2], generic(c["def"])) for c in constraints
        ),
    }


async def test_fresh_migration_matches_the_schema_snapshot(backend: PostgresBackend) -> None:
    """The migration-replay check: what the files create is what the snapshot documents."""
    snapshot = await schema_snapshot(backend)
    await backend.migrate()  # replaying changes nothing
    assert await schema_snapshot(backend) == snapshot
    assert snapshot == SCHEMA_SNAPSHOT


def test_documented_columns_are_in_the_snapshot() -> None:
    """docs/api.rst's promise to operators: these columns of <schema>.jobs exist."""
    documented = {
        *("id", "queue", "payload", "status", "priority", "attempts", "max_attempts"),
        *("claim_seq", "not_visible_until", "progress", "last_error", "cancel_requested_at"),
        *("created_at", "finished_at"),
    }
    assert documented <= {c[1] for c in SCHEMA_SNAPSHOT["columns"] if c[0] == "jobs"}


@pytest.mark.parametrize("features", [False, True], ids=["plain", "limits-and-groups"])
async def test_claim_query_uses_the_partial_index(backend: PostgresBackend, features: bool) -> None:
    """Thousands of finished rows and leases in flight: the claim reads the queued index.

    With every flow-control feature on (limits, so the locked step of the claim; groups
    among the waiting rows and the running ones) it still reads only indexes of jobs."""
    if features:
        await backend.set_queue_limits(Q, max_running=10_000, max_per_second=1e5)
    async with backend.acquire() as connection:
        await connection.execute(
            f"INSERT INTO {jobs_table(backend)} "
            "(queue, payload, status, max_attempts, finished_at, attempts, claim_seq) "
            "SELECT $1, '{}'::jsonb, 'succeeded', 1, now(), 1, 1 FROM generate_series(1, 20000)",
            Q,
        )
        await connection.execute(
            f"INSERT INTO {jobs_table(backend)} (queue, payload, status, max_attempts, "
            "not_visible_until, lease_floor, attempts, claim_seq, worker_id) "
            "SELECT $1, '{}'::jsonb, 'running', 3, now() + interval '1 hour', "
            "now() + interval '1 hour', 1, 1, 'w' FROM generate_series(1, 2000)",
            Q,
        )
        await backend.enqueue_many(Q, list(range(100)))
        if features:
            for n in range(50):
                await backend.enqueue_many(Q, list(range(20)), group=f"g{n}")
            await connection.execute(
                f"UPDATE {jobs_table(backend)} SET group_key = 'g' || (id % 50) "
                "WHERE status = 'running'"
            )
        await connection.execute(f"ANALYZE {jobs_table(backend)}")
        explained = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + render(QUERIES["claim"], backend.schema),
            # As a pool claims: quarantine on, alone (a pool with nothing in flight) or not.
            *(Q, 10, "w", V, features, 2, not features),
        )
    [plan] = json.loads(explained)
    scans = list(_scans(plan["Plan"]))
    on_jobs = [(kind, index) for kind, relation, index in scans if relation == "jobs"]
    assert ("Index Scan", "jobs_claim_queued_idx") in on_jobs
    # Expired leases: a range scan on the floor that renewals leave alone (migration 0006).
    # (A bitmap index scan names its index, not its table.)
    assert "jobs_claim_leased_floor_idx" in {index for _, _, index in scans}, scans
    assert all(kind != "Seq Scan" for kind, _ in on_jobs), on_jobs
    if features:  # the group probes: the group's running rows, and its next waiting row
        indexes = {index for _, _, index in scans}
        assert {"jobs_group_running_idx", "jobs_group_queued_idx"} <= indexes, sorted(
            map(str, scans)
        )


@pytest.mark.parametrize("alone", [False, True], ids=["busy-pool", "idle-pool"])
async def test_claim_looks_for_quarantined_jobs_on_the_expired_lease_index(
    backend: PostgresBackend, alone: bool
) -> None:
    """docs/protocol.rst §13: the claim's look for a quarantined job (to take it alone, or
    to answer alone_waiting) is a range scan of the expired leases, whatever the mix of
    waiting and leased rows (as an EXISTS it was planned as a read of the whole table)."""
    async with backend.acquire() as connection:
        await connection.execute(
            f"INSERT INTO {jobs_table(backend)} (queue, payload, max_attempts) "
            "SELECT $1, '{}'::jsonb, 10 FROM generate_series(1, 5000)",
            Q,
        )
        await connection.execute(
            f"INSERT INTO {jobs_table(backend)} (queue, payload, status, max_attempts, "
            "not_visible_until, lease_floor, attempts, claim_seq, worker_id) "
            "SELECT $1, '{}'::jsonb, 'running', 10, now() + interval '1 hour', "
            "now() + interval '1 hour', 1, 1, 'w' FROM generate_series(1, 2000)",
            Q,
        )
        await connection.execute(f"ANALYZE {jobs_table(backend)}")
        explained = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + render(QUERIES["claim"], backend.schema),
            *(Q, 10, "w", V, False, 2, alone),
        )
    [plan] = json.loads(explained)
    scans = list(_scans(plan["Plan"]))
    assert all(kind != "Seq Scan" for kind, relation, _ in scans if relation == "jobs"), scans


def _scans(node: dict[str, Any]) -> Iterator[tuple[str, str | None, str | None]]:
    if "Relation Name" in node or "Index Name" in node:  # (a bitmap index scan: no relation)
        yield node["Node Type"], node.get("Relation Name"), node.get("Index Name")
    for child in node.get("Plans", []):
        yield from _scans(child)


# -- locks, fences and the renewal statement ------------------------------------------------


async def test_renewal_skips_a_row_locked_elsewhere(backend: PostgresBackend) -> None:
    """A locked row answers UNCHANGED at once; the others in the statement are extended."""
    await backend.enqueue_many(Q, [1, 2, 3])
    claimed = await claim(backend)
    locked = claimed[1]
    before = await row(backend, locked.job.id)
    async with backend.acquire() as other, other.transaction():
        await other.execute(
            f"SELECT 1 FROM {jobs_table(backend)} WHERE id = $1 FOR UPDATE", locked.job.id
        )
        with trio.fail_after(5):  # the renewal must never wait on the lock
            verdicts = await backend.renew(
                [item(c, 0.5) for c in claimed], visibility_timeout=2 * V
            )
        expected = {c.job.id: Verdict.EXTENDED for c in claimed}
        expected[locked.job.id] = Verdict.UNCHANGED
        assert verdicts == expected
    after = await row(backend, locked.job.id)
    assert (after["lease_until"], after["progress"]) == (before["lease_until"], None)
    for c in claimed:
        if c is not locked:
            renewed = await row(backend, c.job.id)
            assert renewed["lease_until"] > c.lease_until + V / 2
            assert renewed["progress"] == 0.5
    # The lock is gone: the same renewal now extends it too.
    verdicts = await backend.renew([item(locked)], visibility_timeout=V)
    assert verdicts == {locked.job.id: Verdict.EXTENDED}


async def test_late_renewal_never_shortens_a_newer_renewals_lease(
    backend: PostgresBackend,
) -> None:
    """I6 on the row: an older renewal statement that writes after a newer one (an abandoned
    call that came unstuck) leaves the later lease and progress in place, so the worker's
    fence, counted from the newer renewal, never outlives the row's lease."""
    [job_id] = await backend.enqueue_many(Q, ["x"])
    [claimed] = await claim(backend)
    renew_sql = render(QUERIES["renew"], backend.schema)
    no_beat = (None,) * 10
    args = ([str(job_id)], [str(claimed.job.claim_seq)], ["0.25"], V, *no_beat, None)
    async with backend.acquire() as old, old.transaction():
        # The old statement's now() is fixed here, round trips before the newer renewal's.
        await old.fetchval("SELECT now()")
        await backend.renew([item(claimed, 0.75)], visibility_timeout=V)
        newer = (await row(backend, job_id))["lease_until"]
        await old.fetch(renew_sql, *args)  # the late writer, with its earlier now()
    after = await row(backend, job_id)
    assert (after["lease_until"], after["progress"]) == (newer, 0.75)


async def test_renewal_renews_a_row_changed_after_its_snapshot(backend: PostgresBackend) -> None:
    """A row another transaction changed and committed after the renewal statement took its
    snapshot, but before its lock reached the row, is renewed in that newest version and
    answered by it: a cancel request committed in between says CANCEL_REQUESTED (the
    statement's ``renewed_late`` step, queries.sql). The statement is held there by an
    advisory lock the test adds in front of its row lock."""
    await backend.enqueue_many(Q, [1, 2])
    raced, calm = await claim(backend)
    renew_sql = render(QUERIES["renew"], backend.schema)
    lock_rows = "    FOR UPDATE OF j SKIP LOCKED"
    assert renew_sql.count(lock_rows) == 1
    held = renew_sql.replace(
        lock_rows, "    AND (SELECT pg_advisory_xact_lock(81207)) IS NOT NULL\n" + lock_rows
    )
    args = (
        [str(c.job.id) for c in (raced, calm)],
        [str(c.job.claim_seq) for c in (raced, calm)],
        [None, "0.5"],
        2 * V,
        *(None,) * 11,  # no beat, no checkpoints
    )
    answers: dict[int, str] = {}
    async with backend.acquire() as gate, backend.acquire() as renewer:
        await gate.execute("SELECT pg_advisory_lock(81207)")

        async def renew() -> None:
            rows = await renewer.fetch(held, *args)
            answers.update((r["id"], r["verdict"]) for r in rows)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(renew)
            # Until the statement waits at the gate: its snapshot is taken.
            await wait_for_lock_wait(backend, longer_than=0)
            await gate.execute(
                f"UPDATE {jobs_table(backend)} SET cancel_requested_at = now() WHERE id = $1",
                raced.job.id,
            )
            await gate.execute("SELECT pg_advisory_unlock(81207)")
    assert answers == {raced.job.id: "cancel_requested", calm.job.id: "extended"}
    for claimed, progress in ((raced, None), (calm, 0.5)):
        renewed = await row(backend, claimed.job.id)
        assert renewed["lease_until"] > claimed.lease_until + V / 2
        assert renewed["progress"] == progress
    assert (await row(backend, raced.job.id))["cancel_acknowledged_at"] is not None


async def test_one_renewal_statement_for_a_thousand_jobs(backend: PostgresBackend) -> None:
    """I10 on PostgreSQL: one call, one statement, whatever the job count."""
    await backend.enqueue_many(Q, list(range(1000)))
    claimed = await claim(backend, limit=1000)
    assert len(claimed) == 1000
    renewals = backend.statistics()["calls"]["renew"]
    verdicts = await backend.renew([item(c, 0.25) for c in claimed], visibility_timeout=V)
    assert set(verdicts.values()) == {Verdict.EXTENDED}
    assert len(verdicts) == 1000
    assert backend.statistics()["calls"]["renew"] == renewals + 1


async def test_fencing_after_another_session_bumps_claim_seq(backend: PostgresBackend) -> None:
    """I9: once claim_seq moved on, the old attempt's renewal says RECLAIMED and writes fail."""
    job_id = await backend.enqueue(Q, "x")
    [old] = await claim(backend)
    async with backend.acquire() as other:
        await other.execute(
            f"UPDATE {jobs_table(backend)} SET claim_seq = claim_seq + 1 WHERE id = $1", job_id
        )
    before = await row(backend, job_id)
    assert await backend.renew([item(old, 0.9)], visibility_timeout=V) == {
        job_id: Verdict.RECLAIMED
    }
    seq = old.job.claim_seq
    assert await backend.ack([Ack(job_id, seq, progress=0.9)]) == [False]
    assert await backend.fail([Failure(job_id, seq, "late", 0.0)]) == [None]
    assert await backend.fail([Failure(job_id, seq, "late", None)]) == [None]
    assert await backend.release([Release(job_id, seq)]) == [False]
    assert dict(await row(backend, job_id)) == dict(before)
    new = RenewItem(job_id, seq + 1, None)
    assert await backend.renew([new], visibility_timeout=V) == {job_id: Verdict.EXTENDED}


async def test_batched_outcomes_answer_per_item(backend: PostgresBackend) -> None:
    ids = await backend.enqueue_many(Q, list(range(4)), max_attempts=3)
    claimed = {c.job.id: c for c in await claim(backend)}
    a, b, c, d = (claimed[i] for i in ids)
    acks = [Ack(a.job.id, a.job.claim_seq), Ack(b.job.id, b.job.claim_seq + 5)]
    acks += [Ack(a.job.id, a.job.claim_seq), Ack(10**9, 1), Ack(2**70, 1)]
    assert await backend.ack(acks) == [True, False, False, False, False]
    failures = [
        Failure(b.job.id, b.job.claim_seq, "again", retry_delay=0.0),
        Failure(c.job.id, c.job.claim_seq, "final", retry_delay=None),
    ]
    assert await backend.fail(failures) == [Recorded.RETRY, Recorded.FINAL]
    assert await backend.release([Release(d.job.id, d.job.claim_seq)]) == [True]
    states = {i.id: (i.status, i.attempts, i.last_error) for i in await backend.list_jobs()}
    assert states == {
        a.job.id: ("succeeded", 1, None),
        b.job.id: ("ready", 1, "again"),
        c.job.id: ("failed", 1, "final"),
        d.job.id: ("ready", 0, None),
    }
    assert backend.statistics()["calls"]["ack"] == 1


async def test_concurrent_claims_never_share_a_job(postgres_dsn: str, postgres_schema: str) -> None:
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=8) as backend:
        await backend.migrate()
        ids = await backend.enqueue_many(Q, list(range(300)))
        taken: list[int] = []

        async def consumer(name: str) -> None:
            while claimed := await claim(backend, limit=7, worker=name):
                taken.extend(c.job.id for c in claimed)
                await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in claimed])

        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(consumer, f"w{n}")
        assert sorted(taken) == ids
        stats = backend.statistics()
        assert stats["connections_in_use"] == 0
        assert 1 <= stats["peak_connections_in_use"] <= 8


# -- inputs PostgreSQL cannot hold (out-of-range options: the conformance suite) -----------


async def test_ids_out_of_bigint_range_name_no_job(backend: PostgresBackend) -> None:
    with pytest.raises(LookupError):
        await backend.get_job(2**70)
    assert await backend.cancel(2**70) is False
    assert await backend.renew([RenewItem(2**70, 1, None)], visibility_timeout=V) == {
        2**70: Verdict.GONE
    }
    with pytest.raises(ValueError, match="visibility_timeout"):
        await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=1e300)


async def test_payload_round_trips_through_jsonb(backend: PostgresBackend) -> None:
    payload = {"text": "naïve ☃ \u2028", "nested": [{"a": None}, [], {}], "big": 2**62, "f": 0.1}
    job_id = await backend.enqueue(Q, payload)
    assert (await backend.get_job(job_id)).payload == payload
    [claimed] = await claim(backend)
    assert claimed.job.payload == payload


# -- notices --------------------------------------------------------------------------------


async def test_listener_filters_by_queue_and_worker(backend: PostgresBackend) -> None:
    await backend.enqueue_many(Q, ["mine", "theirs"])
    mine, theirs = await claim(backend, limit=1, worker="me:1") + await claim(
        backend, limit=1, worker="you:2"
    )
    async with backend.listen(Q, "me:1") as notices:
        await backend.enqueue("other:queue", "x")
        await backend.cancel(theirs.job.id)
        await backend.cancel(mine.job.id)
        await backend.enqueue(Q, "y")
        with trio.fail_after(5):
            first = await notices.receive()
            second = await notices.receive()
    assert first == Notice(NoticeKind.CANCEL, Q, mine.job.id)
    assert second == Notice(NoticeKind.AVAILABLE, Q)


async def test_retry_and_release_notify_the_queue(backend: PostgresBackend) -> None:
    await backend.enqueue_many(Q, [1, 2])
    first, second = await claim(backend)
    async with backend.listen(Q, "w") as notices:
        await backend.fail([Failure(first.job.id, first.job.claim_seq, "boom", 0.0)])
        with trio.fail_after(5):
            assert await notices.receive() == Notice(NoticeKind.AVAILABLE, Q)
        await backend.release([Release(second.job.id, second.job.claim_seq)])
        with trio.fail_after(5):
            assert await notices.receive() == Notice(NoticeKind.AVAILABLE, Q)


async def test_lost_listener_connection_ends_the_channel(backend: PostgresBackend) -> None:
    async with backend.listen(Q, "w") as notices:
        assert backend.statistics()["listeners"] == 1
        async with backend.acquire() as connection:
            killed = await connection.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1",
                f'LISTEN "{backend.channel}"',
            )
        assert killed == 1
        with trio.fail_after(5), pytest.raises(trio.EndOfChannel):
            await notices.receive()
    assert backend.statistics()["listeners"] == 0
    async with backend.listen(Q, "w") as notices:  # listening again works
        await backend.enqueue(Q, "x")
        with trio.fail_after(5):
            assert await notices.receive() == Notice(NoticeKind.AVAILABLE, Q)


# -- retention ------------------------------------------------------------------------------


async def test_prune_deletes_old_finished_jobs_only(backend: PostgresBackend) -> None:
    done, waiting = await backend.enqueue_many(Q, ["done", "waiting"])
    [claimed] = await claim(backend, limit=1)
    await backend.ack([Ack(done, claimed.job.claim_seq)])
    assert await backend.prune(3600) == 0  # finished just now
    assert await backend.prune(0) == 1
    assert [i.id for i in await backend.list_jobs()] == [waiting]


# -- losing connections ---------------------------------------------------------------------


async def terminate_backend_connections(backend: PostgresBackend) -> int:
    """Kill every server session of ``backend`` except the one asking."""
    async with backend.acquire() as connection:
        killed: int = await connection.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1 AND pid <> pg_backend_pid()",
            f"trioqueue:{backend.schema}",
        )
    return killed


async def test_pool_reconnects_after_its_connections_are_killed(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async with open_postgres(postgres_dsn, schema=postgres_schema, max_connections=3) as backend:
        await backend.migrate()
        async with trio.open_nursery() as nursery:  # use all three connections
            for n in range(6):
                nursery.start_soon(backend.enqueue, Q, n)
        killed = await terminate_backend_connections(backend)
        assert killed >= 2
        errors = 0
        with trio.fail_after(10):
            while True:
                try:
                    await backend.enqueue(Q, "after")
                    break
                except BackendError:
                    # A connection whose death the pool has not seen yet fails the one call
                    # that finds it; the pool then opens a new one in its place.
                    errors += 1
        assert errors <= killed
        for _ in range(3):
            await backend.enqueue(Q, "after")
        assert len(await claim(backend, limit=100)) == 6 + 4


async def test_error_text_postgres_cannot_hold_is_stored_escaped(backend: PostgresBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    [claimed] = await claim(backend)
    failure = Failure(job_id, claimed.job.claim_seq, "bad\x00byte \ud800", retry_delay=None)
    assert await backend.fail([failure]) == [Recorded.FINAL]
    assert (await backend.get_job(job_id)).last_error == "bad\\x00byte \\ud800"


async def test_cancelled_call_cancels_its_statement_and_frees_its_connection(
    backend: PostgresBackend,
) -> None:
    """A trio deadline crosses the bridge: the server statement stops, the connection returns."""
    await backend.enqueue(Q, "x")
    [claimed] = await claim(backend)
    async with backend.acquire() as other, other.transaction():
        # A table lock, unlike a row lock, makes even a SKIP LOCKED renewal wait.
        await other.execute(f"LOCK TABLE {jobs_table(backend)} IN ACCESS EXCLUSIVE MODE")
        with trio.move_on_after(0.3) as scope:
            await backend.renew([item(claimed)], visibility_timeout=V)
        assert scope.cancelled_caught
        assert backend.statistics()["connections_in_use"] == 1  # only `other`
        waiting = await other.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
            "AND wait_event_type = 'Lock'",
            f"trioqueue:{backend.schema}",
        )
        assert waiting == 0
    assert await backend.renew([item(claimed)], visibility_timeout=V) == {
        claimed.job.id: Verdict.EXTENDED
    }


async def test_two_backends_in_one_trio_run_stay_apart(
    postgres_dsn: str, postgres_schema: str, postgres_janitor: Janitor
) -> None:
    other_schema = postgres_schema + "_b"
    try:
        async with (
            open_postgres(postgres_dsn, schema=postgres_schema) as a,
            open_postgres(postgres_dsn, schema=other_schema) as b,
        ):
            await a.migrate()
            await b.migrate()
            async with a.listen(Q, "w") as notices_a, b.listen(Q, "w") as notices_b:
                await a.enqueue(Q, "for a")
                with trio.fail_after(5):
                    assert await notices_a.receive() == Notice(NoticeKind.AVAILABLE, Q)
                with trio.move_on_after(0.2):
                    assert await notices_b.receive() is None  # no notice crosses schemas
            assert [i.payload for i in await a.list_jobs()] == ["for a"]
            assert await b.list_jobs() == []
    finally:
        postgres_janitor.drop(other_schema)


async def test_unreachable_database_raises_backend_error() -> None:
    with pytest.raises(BackendError, match="ConnectionRefused"):
        async with open_postgres("postgresql://postgres@127.0.0.1:1/none"):
            pass


async def test_exceptions_leave_the_block_unwrapped(
    postgres_dsn: str, postgres_schema: str
) -> None:
    """The trio-asyncio loop's nurseries stay inside: the caller's exception is its own."""
    with pytest.raises(KeyError, match="mine") as raised:
        async with open_postgres(postgres_dsn, schema=postgres_schema):
            raise KeyError("mine")
    assert raised.value.__context__ is None
