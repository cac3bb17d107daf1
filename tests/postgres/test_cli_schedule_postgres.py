"""``trioqueue schedule set|delete|list`` against a real server, each test in its own schema."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import trio

import trioqueue
from trioqueue.cli import main

from .test_cli_postgres import Cli

pytestmark = pytest.mark.postgres


@pytest.fixture
def run(postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on a migrated schema of its own."""
    tq = Cli(postgres_dsn, postgres_schema, capsys)
    assert tq("migrate")[0] == 0
    return tq


async def _schedules(dsn: str, schema: str) -> list[trioqueue.ScheduleInfo]:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.list_schedules()


def test_set_list_replace_and_delete(run: Cli) -> None:
    code, out, err = run(
        "schedule", "set", "nightly", "reports", "30 2 * * *",
        "--payload", '{"kind": "daily"}', "--timezone", "Europe/Berlin",
        "--priority", "5", "--max-attempts", "3",
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith(
        "schedule 'nightly': '30 2 * * *' in Europe/Berlin on queue 'reports'; next run "
    )
    [stored] = trio.run(_schedules, run.dsn, run.schema)
    assert (stored.payload, stored.priority, stored.max_attempts) == ({"kind": "daily"}, 5, 3)
    assert stored.next_run_at > datetime.now(UTC)

    assert run("schedule", "set", "nightly", "other", "0 3 * * *")[0] == 0  # replaces it
    assert run("schedule", "set", "hourly", "reports", "0 * * * *")[0] == 0
    code, out, _ = run("schedule", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "NAME",
        "QUEUE",
        "CRON",
        "TIMEZONE",
        "NEXT",
        "RUN",
        "IN",
        "LAST",
        "RUN",
    ]
    assert [line.split()[:2] for line in lines[1:]] == [["hourly", "reports"], ["nightly", "other"]]
    assert all(line.endswith("never") for line in lines[1:])

    assert run("schedule", "delete", "nightly") == (0, "schedule 'nightly' deleted\n", "")
    code, _, err = run("schedule", "delete", "nightly")
    assert (code, err) == (1, "trioqueue schedule: error: no schedule named 'nightly'\n")
    assert [s.name for s in trio.run(_schedules, run.dsn, run.schema)] == ["hourly"]


def test_list_without_schedules(run: Cli) -> None:
    assert run("schedule", "list") == (0, f"no schedules in schema {run.schema}\n", "")


def test_bad_input_writes_nothing(run: Cli) -> None:
    code, _, err = run("schedule", "set", "s", "q", "0 0 30 2 *", "--timezone", "Nowhere")
    assert code == 2
    assert "day-of-month" in err
    assert "unknown timezone 'Nowhere'" in err
    assert trio.run(_schedules, run.dsn, run.schema) == []


def test_an_unmigrated_schema_says_to_migrate(
    postgres_dsn: str, postgres_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--dsn", postgres_dsn, "--schema", postgres_schema, "schedule", "list"]) == 1
    assert "trioqueue migrate --schema" in capsys.readouterr().err
