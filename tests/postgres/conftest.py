"""The fixture most PostgreSQL tests share: a migrated backend on the test's own schema.

A module that needs another kind of backend (a pool size, a driver setting) defines its own
``backend`` fixture, which overrides this one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from trioqueue._backends.postgres import PostgresBackend, open_postgres


@pytest.fixture
async def backend(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresBackend]:
    """A backend on the test's fresh schema, migrated."""
    async with open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        await backend.migrate()
        yield backend
