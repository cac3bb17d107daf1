"""``trioqueue schedule set|delete|list`` without a database: parsing, bad input, the table.

The database functions are stood in for where a command would reach them; the real thing
runs in tests/postgres/test_cli_schedule_postgres.py. Also ``worker --schedule-interval``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import trioqueue
from trioqueue.cli import main
from trioqueue.cli._commands import build_parser
from trioqueue.cli._commands.worker import worker_configs
from trioqueue.cli._schedule import schedule_report, schedules_table

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/test"  # nothing listens on port 1
HANDLER = "tests.unit.test_cli_schedule:handler"
NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


async def handler(payload: Any, ctx: trioqueue.JobContext) -> None:
    pass


def info(name: str = "nightly", **changes: Any) -> trioqueue.ScheduleInfo:
    fields: dict[str, Any] = {
        "name": name,
        "queue": "reports",
        "cron": "30 2 * * *",
        "timezone": "Europe/Berlin",
        "payload": None,
        "priority": 0,
        "max_attempts": 10,
        "next_run_at": datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        "last_run_at": None,
    }
    fields.update(changes)
    return trioqueue.ScheduleInfo(**fields)


def test_set_passes_every_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[Any] = []

    async def set_schedule(
        dsn: str, schema: str, name: str, queue: str, cron: str, options: dict[str, Any]
    ) -> trioqueue.ScheduleInfo:
        calls.append((dsn, schema, name, queue, cron, options))
        return info()

    monkeypatch.setattr("trioqueue.cli._schedule.set_schedule", set_schedule)
    argv = ["schedule", "set", "nightly", "reports", "30 2 * * *", "--payload", '{"a": [1]}']
    argv += ["--timezone", "Europe/Berlin", "--priority", "3", "--max-attempts", "2"]
    assert main([*argv, "--dsn", UNREACHABLE, "--schema", "s"]) == 0
    assert calls == [
        (
            UNREACHABLE,
            "s",
            "nightly",
            "reports",
            "30 2 * * *",
            {"payload": {"a": [1]}, "timezone": "Europe/Berlin", "priority": 3, "max_attempts": 2},
        )
    ]
    # 03:00 local: that night's 02:30 does not exist in Berlin (spring forward).
    assert capsys.readouterr().out == (
        "schedule 'nightly': '30 2 * * *' in Europe/Berlin on queue 'reports'; "
        "next run 2026-03-29 03:00 +0200\n"
    )


def test_set_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["schedule", "set", "n", "q", "* * * * *"])
    assert (args.payload, args.timezone, args.priority, args.max_attempts) == (
        "null",
        "UTC",
        0,
        None,
    )


def test_bad_payload_is_refused_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--dsn", UNREACHABLE, "schedule", "set", "n", "q", "* * * * *", "--payload", "{"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("trioqueue schedule: error: --payload is not valid JSON")
    assert "nothing was written" in err


def test_bad_cron_and_zone_exit_2_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    """The checks run before a connection is opened: the DSN here reaches nothing."""
    argv = ["--dsn", UNREACHABLE, "schedule", "set", "n", "q", "61 * * * *"]
    assert main([*argv, "--timezone", "Mars/Olympus"]) == 2
    err = capsys.readouterr().err
    assert "cron '61 * * * *' is not valid" in err
    assert "unknown timezone 'Mars/Olympus'" in err


def test_every_problem_is_listed_at_once_and_nothing_connects(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad payload, cron and time zone together: one error listing all three, exit 2,
    before connecting (the DSN reaches nothing, so a write would have failed with exit 1)."""
    argv = ["--dsn", UNREACHABLE, "schedule", "set", "n", "q", "61 * * * *", "--payload", "{"]
    assert main([*argv, "--timezone", "Mars/Olympus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trioqueue schedule: error: ")
    assert "--payload is not valid JSON" in err
    assert "cron '61 * * * *' is not valid" in err
    assert "unknown timezone 'Mars/Olympus'" in err
    assert err.rstrip().endswith("nothing was written")


def test_delete_of_an_unknown_schedule_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def delete_schedule(dsn: str, schema: str, name: str) -> bool:
        return name == "known"

    monkeypatch.setattr("trioqueue.cli._schedule.delete_schedule", delete_schedule)
    assert main(["--dsn", UNREACHABLE, "schedule", "delete", "known"]) == 0
    assert capsys.readouterr().out == "schedule 'known' deleted\n"
    assert main(["--dsn", UNREACHABLE, "schedule", "delete", "gone"]) == 1
    assert capsys.readouterr().err == "trioqueue schedule: error: no schedule named 'gone'\n"


def test_an_action_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["schedule"])
    assert exited.value.code == 2


def test_schedules_table_shows_local_next_and_last_runs() -> None:
    schedules = [
        info(last_run_at=datetime(2026, 3, 28, 1, 30, tzinfo=UTC)),
        info(
            "every-minute",
            cron="* * * * *",
            timezone="UTC",
            next_run_at=NOW + timedelta(seconds=40),
        ),
    ]
    assert schedules_table(schedules, NOW) == [
        "NAME          QUEUE    CRON        TIMEZONE       NEXT RUN                IN      LAST RUN",
        "nightly       reports  30 2 * * *  Europe/Berlin  2026-03-29 03:00 +0200  13h00m  2026-03-28 02:30 +0100",
        "every-minute  reports  * * * * *   UTC            2026-03-28 12:00 +0000  40s     never",
    ]


def test_schedule_report_of_an_unknown_zone_shows_utc() -> None:
    assert schedule_report(info(timezone="Gone/Zone")).endswith("next run 2026-03-29 01:00 +0000")


def test_worker_schedule_interval_option() -> None:
    [config] = worker_configs(build_parser().parse_args(["worker", HANDLER, "--queue", "q"]))
    assert config.schedule_interval == 5
    for value, expected in (("0.5", 0.5), ("off", None)):
        argv = ["worker", HANDLER, "--queue", "q", "--schedule-interval", value]
        [config] = worker_configs(build_parser().parse_args(argv))
        assert config.schedule_interval == expected
    with pytest.raises(SystemExit):
        build_parser().parse_args(["worker", HANDLER, "--schedule-interval", "never"])
