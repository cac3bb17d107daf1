"""Bad input and failures that retrying cannot fix, on PostgreSQL (issue 7).

Each test that needs a server runs in a schema of its own.
"""

from __future__ import annotations

import pytest

import trioqueue
from trioqueue.cli import main

# -- values no backend can take ---------------------------------------------------------


@pytest.mark.postgres
async def test_prune_refuses_an_age_beyond_float_range(
    postgres_dsn: str, postgres_schema: str
) -> None:
    async with trioqueue.open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        await backend.migrate()
        with pytest.raises(ValueError, match="older_than must be None or a number >= 0"):
            await backend.prune(10**400)


@pytest.mark.postgres
def test_cli_enqueue_refuses_a_dedup_key_past_the_limit_in_one_line(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, a 3 KB key reached the unique index: ProgramLimitExceededError, exit 1."""
    database = ["--dsn", postgres_dsn, "--schema", postgres_schema]
    assert main([*database, "migrate"]) == 0
    key = "k" * 3000
    code = main([*database, "enqueue", "q", '{"n": 1}', "--dedup-key", key])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "trioqueue enqueue: error: dedup_key must be at most 1024 bytes of UTF-8, not 3000 "
        "(hash a longer key)\n"
    )
    assert main([*database, "jobs"]) == 0
    assert '"n"' not in capsys.readouterr().out  # nothing written
