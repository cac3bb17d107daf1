"""``trioqueue schedule set|delete|list|enable|disable|run``: the subcommand; its arguments and database work
are in trioqueue/cli/_schedule.py.
"""

from __future__ import annotations

import argparse
import datetime

from trioqueue.cli import _schedule
from trioqueue.cli._commands.common import (
    EXIT_FAILED,
    CliError,
    Subparsers,
    common_options,
    errors_as_cli_errors,
    run_on_database,
    schema_of,
)
from trioqueue.cli._escape import say


def add(commands: Subparsers) -> None:
    schedule = commands.add_parser(
        "schedule", help=_schedule.HELP, description=_schedule.DESCRIPTION
    )
    for action in _schedule.add_arguments(schedule, common_options()).values():
        action.set_defaults(run=_run_schedule)


def _run_schedule(args: argparse.Namespace) -> int:
    if args.action == "set":
        with errors_as_cli_errors():  # bad input exits 2 before anything connects
            options = _schedule.checked_options(
                args.name,
                args.queue,
                args.cron,
                payload=args.payload,
                timezone=args.timezone,
                priority=args.priority,
                max_attempts=args.max_attempts,
            )
        info = run_on_database(
            args, _schedule.set_schedule, args.name, args.queue, args.cron, options
        )
        say(_schedule.schedule_report(info))
    elif args.action in ("enable", "disable"):
        enabled = args.action == "enable"
        if not run_on_database(args, _schedule.enable_schedule, args.name, enabled):
            raise CliError(f"no schedule named {args.name!r}", EXIT_FAILED)
        say(f"schedule {args.name!r} {args.action}d")
    elif args.action == "run":
        job_id = run_on_database(args, _schedule.run_schedule_now, args.name)
        if job_id is None:
            raise CliError(f"no schedule named {args.name!r}", EXIT_FAILED)
        say(str(job_id))
    elif args.action == "delete":
        if not run_on_database(args, _schedule.delete_schedule, args.name):
            raise CliError(f"no schedule named {args.name!r}", EXIT_FAILED)
        say(f"schedule {args.name!r} deleted")
    else:
        schedules = run_on_database(args, _schedule.list_schedules)
        if not schedules:
            say(f"no schedules in schema {schema_of(args)}")
        else:
            now = datetime.datetime.now(datetime.UTC)
            say(*_schedule.schedules_table(schedules, now))
    return 0
