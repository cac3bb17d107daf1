"""``trioqueue worker`` over several databases: which queue runs where, and every bad
combination refused in one error before connecting (docs/cli.rst, "worker over several
databases").

Nothing here connects: every DSN is of a port nothing listens on, and the options are read
by :func:`~trioqueue.cli._commands.worker_databases.database_groups` or refused by
:func:`trioqueue.cli.main` with exit 2.
"""

from __future__ import annotations

from typing import Any

import pytest

import trioqueue
from trioqueue.cli._commands import build_parser, main
from trioqueue.cli._commands.worker import worker_configs
from trioqueue.cli._commands.worker_databases import Group, database_groups, take_placements
from trioqueue.cli._commands.worker_groups import serve_groups

HERE = "tests.unit.test_cli_worker_databases"
A = "postgresql://alice:s3cret@127.0.0.1:1/a"
B = "postgresql://bob:hunter2@127.0.0.1:1/b"


async def send_email(payload: Any, ctx: trioqueue.JobContext) -> None:
    """A handler to import."""


async def make_report(payload: Any, ctx: trioqueue.JobContext) -> None:
    """Another one."""


HANDLERS = {"emails": send_email, "reports": make_report, "alerts": send_email}


def groups_of(*argv: str, listen_dsn: str | None = None) -> list[Group] | None:
    args = build_parser().parse_args(["worker", *argv])
    placed = take_placements(args)
    return database_groups(args, worker_configs(args), placed, listen_dsn)


def layout(groups: list[Group] | None) -> dict[str, tuple[str, str, list[str]]]:
    assert groups is not None
    return {
        g.database.name: (g.database.dsn, g.database.schema, [c.queue for c in g.configs])
        for g in groups
    }


def test_without_databases_the_worker_runs_on_one_as_before() -> None:
    assert groups_of("--dsn", A, f"{HERE}:HANDLERS") is None


def test_a_queue_placed_with_at_name_runs_there_the_others_on_the_default() -> None:
    groups = groups_of(
        "--dsn", A, "--database", f"reporting={B}",
        "--queue", f"emails={HERE}:send_email",
        "--queue", f"reports={HERE}:make_report@reporting",
    )  # fmt: skip
    assert layout(groups) == {
        "default": (A, "trioqueue", ["emails"]),
        "reporting": (B, "trioqueue", ["reports"]),
    }


def test_queues_on_places_the_queues_of_a_mapping_with_a_schema_of_its_own() -> None:
    groups = groups_of(
        "--dsn", A, "--schema", "jobs", f"{HERE}:HANDLERS",
        "--database", f"b={B}", "--database-schema", "b=other",
        "--queues-on", "b=reports, alerts",
    )  # fmt: skip
    assert layout(groups) == {
        "default": (A, "jobs", ["emails"]),
        "b": (B, "other", ["reports", "alerts"]),
    }


def test_every_queue_may_leave_the_default_database_which_then_is_not_opened() -> None:
    groups = groups_of(
        "--dsn", A, "--database", f"b={B}", f"{HERE}:send_email", "--queue", "emails",
        "--queues-on", "b=emails",
    )  # fmt: skip
    assert layout(groups) == {"b": (B, "trioqueue", ["emails"])}


def test_the_listen_dsn_is_the_default_databases() -> None:
    groups = groups_of(
        "--dsn", A, "--database", f"b={B}", f"{HERE}:HANDLERS", "--queues-on", "b=alerts",
        listen_dsn="postgresql://127.0.0.1:1/direct",
    )  # fmt: skip
    assert groups is not None
    listen = {g.database.name: g.database.listen_dsn for g in groups}
    assert listen == {"default": "postgresql://127.0.0.1:1/direct", "b": None}


def test_a_dsn_is_shown_with_its_password_masked() -> None:
    groups = groups_of("--database", f"b={B}", f"{HERE}:send_email", "--queue", "q",
                       "--queues-on", "b=q")  # fmt: skip
    assert groups is not None
    assert groups[0].database.shown == "postgresql://bob:***@127.0.0.1:1/b, schema trioqueue"


def test_a_module_path_keeps_its_colon_and_a_queue_name_its_at() -> None:
    """Only the handler part of ``--queue`` takes ``@NAME``: a queue name may hold an ``@``."""
    groups = groups_of(
        "--dsn", A, "--database", f"b={B}", "--queue", f"me@example={HERE}:send_email@b"
    )
    assert layout(groups) == {"b": (B, "trioqueue", ["me@example"])}


def error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["worker", *argv]) == 2
    err = capsys.readouterr().err
    assert "s3cret" not in err and "hunter2" not in err  # never a password
    return err


def test_every_bad_combination_is_listed_in_one_error_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = error_of(
        [
            "--dsn", A, f"{HERE}:HANDLERS",
            "--database", f"b={B}",
            "--database", "b=postgresql://127.0.0.1:1/other",  # named twice
            "--database", "c=mysql://carol:pw@host/c",  # not a PostgreSQL DSN
            "--database", "unused=postgresql://127.0.0.1:1/unused",  # serves nothing
            "--database", f"again={A}",  # the default's DSN and schema again
            "--database", "no-dsn",
            "--database", "9lives=postgresql://127.0.0.1:1/x",  # not a name
            "--database-schema", "nobody=s",
            "--queues-on", "b=emails,nosuch",  # a queue this worker does not run
            "--queues-on", "ghost=reports",  # no such database
            "--queues-on", "c=emails",  # on a database refused above: no problem of its own
            "--queue", f"extra={HERE}:send_email@bad name",
        ],
        capsys,
    )  # fmt: skip
    assert err.startswith("trioqueue worker: error: invalid worker configuration (11 problems):")
    for problem in [
        "database 'b' is given twice: one DSN per name",
        "database 'c': invalid DSN 'mysql://carol:***@host/c'",
        "--database 'no-dsn': give NAME=DSN",
        "--database: the name '9lives' is not one",
        "--database-schema nobody: no database is named 'nobody'",
        "databases 'default' and 'again' are the same DSN and schema",
        "--queues-on b=emails,nosuch: queue 'nosuch' is not one this worker runs",
        "--queues-on ghost=reports: no database is named 'ghost' (known: default, b, unused, "
        "again)",
        "--queue extra=tests.unit.test_cli_worker_databases:send_email@bad name: the name "
        "'bad name' is not one",
        "database 'unused' serves no queue",
        "database 'again' serves no queue",
    ]:
        assert f"  - {problem}" in err, problem
    assert "pw@" not in err
    assert "--queues-on c=emails" not in err


def test_a_queue_placed_on_two_databases_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = error_of(
        [
            "--dsn", A, "--database", f"b={B}", "--database", "c=postgresql://127.0.0.1:1/c",
            "--queue", f"emails={HERE}:send_email@b", "--queues-on", "c=emails",
        ],
        capsys,
    )  # fmt: skip
    assert (
        "queue 'emails' is placed twice (--queue emails=tests.unit.test_cli_worker_databases:"
        "send_email@b; --queues-on c=emails): a queue runs on one database"
    ) in err
    assert "database 'c' serves no queue" in err


def test_queues_left_on_the_default_need_its_dsn(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRIOQUEUE_DSN", raising=False)
    err = error_of([f"{HERE}:HANDLERS", "--database", f"b={B}", "--queues-on", "b=alerts"], capsys)
    assert "no database for queues 'emails', 'reports': give --dsn" in err
    assert "@default: no database is named 'default'" not in err


def test_a_hostile_database_name_is_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    err = error_of(["--dsn", A, f"{HERE}:HANDLERS", "--database", "\x1b[31mred=" + B], capsys)
    assert "\x1b" not in err
    assert "the name '\\x1b[31mred' is not one" in err


async def test_a_database_that_does_not_answer_is_named_in_the_error() -> None:
    """Opening happens before any pool starts; the error names the database, its DSN's
    password masked."""
    groups = groups_of("--dsn", A, "--database", f"b={B}", f"{HERE}:HANDLERS",
                       "--queues-on", "b=alerts")  # fmt: skip
    assert groups is not None
    with pytest.raises(trioqueue.BackendError) as caught:
        await serve_groups(groups)
    assert str(caught.value).startswith("database 'default': ")
    assert "s3cret" not in str(caught.value)


def test_the_dashboards_databases_are_checked_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["dashboard", "--dsn", A, "--database", "b c=" + B, "--database", "c=mysql://u:pw@h/c"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "invalid databases (2 problems):" in err
    assert "  - --database: the name 'b c' is not one" in err
    assert "  - database 'c': invalid DSN 'mysql://u:***@h/c'" in err
    assert "hunter2" not in err and "pw@" not in err
