"""``trioqueue dashboard``: the subcommand; its arguments and the serving are in
trioqueue/cli/_dashboard.py.
"""

from __future__ import annotations

import argparse
import sys

from trioqueue.cli import _dashboard
from trioqueue.cli._commands.common import (
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


def _run_dashboard(args: argparse.Namespace) -> int:
    with errors_as_cli_errors():
        # Before connecting: a public bind needs a token, and the names must be names.
        access = _dashboard.check(args.host, args)
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
