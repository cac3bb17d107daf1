"""Bad input and failures that retrying cannot fix, on PostgreSQL (issue 7).

Each test that needs a server runs in a schema of its own.
"""

from __future__ import annotations

import pytest

import trioqueue

# -- values no backend can take ---------------------------------------------------------


@pytest.mark.postgres
async def test_prune_refuses_an_age_beyond_float_range(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async with trioqueue.open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        await backend.migrate()
        with pytest.raises(ValueError, match="older_than must be None or a number >= 0"):
            await backend.prune(10**400)
