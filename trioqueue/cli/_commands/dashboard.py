"""``trioqueue dashboard``: the subcommand; its arguments and the serving are in
trioqueue/cli/_dashboard.py.
"""

from __future__ import annotations

import argparse
import sys

import trio

from trioqueue.cli import _dashboard, _databases
from trioqueue.cli._commands.common import (
    CliError,
    Subparsers,
    add_read_dsn_option,
    errors_as_cli_errors,
    only_interrupts,
    resolve_read_dsn,
    run_on_database,
    subcommand,
)
from trioqueue.cli._escape import say


def add(commands: Subparsers) -> None:
    parser = subcommand(
        commands, "dashboard", _run_dashboard, _dashboard.HELP, _dashboard.DESCRIPTION
    )
    _dashboard.add_arguments(parser)
    add_read_dsn_option(parser)
    _databases.add_database_arguments(
        parser.add_argument_group("several databases (docs/dashboard.rst)"),
        "a further database, named NAME, shown under /db/NAME/ beside --dsn's (named "
        f"{_databases.DEFAULT_DATABASE!r}); repeatable (default: none, one database)",
    )


def _run_dashboard(args: argparse.Namespace) -> int:
    with errors_as_cli_errors():
        # Before connecting: a public bind needs a token, and the names must be names.
        access = _dashboard.check(args.host, args)
        databases = _databases.dashboard_databases(args)
    if databases is not None:  # one dashboard over several databases (_dashboards.py)
        if args.read_dsn:  # a replica of which one? ($TRIOQUEUE_READ_DSN is not used here)
            raise CliError("--read-dsn reads a replica of one database: not with --database")
        return _run_dashboards(args, databases, access)
    try:  # until Ctrl-C, which exits 0 (serving has no other way to end), as jobs --watch
        run_on_database(
            args,
            _dashboard.serve_dashboard,
            args.host,
            args.port,
            args.read_only,
            sys.stdout,
            access,
            resolve_read_dsn(args),
        )
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        if not only_interrupts(exc):
            raise
    say("dashboard stopped")
    return 0


def _run_dashboards(
    args: argparse.Namespace, databases: list[_databases.Database], access: _dashboard.Access
) -> int:
    from trioqueue.cli._dashboards import serve_dashboards

    with errors_as_cli_errors():
        try:
            trio.run(
                serve_dashboards,
                databases,
                args.host,
                args.port,
                args.read_only,
                sys.stdout,
                access,
            )
        except (KeyboardInterrupt, BaseExceptionGroup) as exc:
            if not only_interrupts(exc):
                raise
    say("dashboard stopped")
    return 0
