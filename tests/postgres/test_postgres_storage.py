"""The jobs table's storage settings (migration 0012, docs/performance.rst "Vacuum and
bloat"): autovacuum by the share of rows churned, with migration 0006's fillfactor kept."""

from __future__ import annotations

import pytest

from trioqueue._backends.postgres import PostgresBackend

pytestmark = pytest.mark.postgres


async def reloptions(backend: PostgresBackend, table: str) -> dict[str, str]:
    async with backend.acquire() as connection:
        options = await connection.fetchval(
            "SELECT c.reloptions FROM pg_class AS c JOIN pg_namespace AS n"
            " ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
            backend.schema,
            table,
        )
    return dict(option.split("=", 1) for option in options or [])


async def test_the_jobs_table_is_vacuumed_by_its_churn_not_its_history(
    backend: PostgresBackend,
) -> None:
    """A migrated jobs table has 0012's three scale factors and 0006's fillfactor, nothing
    else."""
    assert await reloptions(backend, "jobs") == {
        "fillfactor": "60",
        "autovacuum_vacuum_scale_factor": "0.01",
        "autovacuum_vacuum_insert_scale_factor": "0.01",
        "autovacuum_analyze_scale_factor": "0.01",
    }
