"""``trioqueue demo``: the subcommand; the workload, live view and verdict are in
trioqueue/cli/_demo.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys

import trio

from trioqueue._backends.postgres import embedded as _embedded
from trioqueue.cli import _dashboard, _demo
from trioqueue.cli._commands.common import (
    DSN_ENV,
    EXIT_FAILED,
    CliError,
    Subparsers,
    bounded_int,
    errors_as_cli_errors,
    resolve_dsn,
    schema_of,
    subcommand,
)
from trioqueue.cli._escape import say
from trioqueue.cli._worker_lines import log_level


def add(commands: Subparsers) -> None:
    demo = subcommand(
        commands,
        "demo",
        _run_demo,
        "run a small workload and watch it live",
        description=(
            "Run a small, realistic workload (reports with progress, a job that fails once "
            "and succeeds on its retry, a long job cancelled mid-run) and watch the stored "
            "state of every job. Exits 0 when every job ended as expected. On PostgreSQL it "
            f"works in a schema of its own (default {_demo.SCHEMA}), created afresh on each "
            "run; it drops only a schema it created itself and refuses any other that "
            f"exists (exit 2). Without --dsn or ${DSN_ENV} it starts an embedded PostgreSQL "
            f"({_embedded.INSTALL_HINT}) and stops it afterwards."
        ),
        schema=_demo.SCHEMA,
    )
    demo.add_argument(
        "--backend",
        choices=["postgres", "memory"],
        default="postgres",
        help="where the jobs live (default: %(default)s; memory: in-process, no database)",
    )
    demo.add_argument(
        "--jobs",
        type=bounded_int(_demo.MIN_JOBS, _demo.MAX_JOBS),
        default=_demo.DemoOptions.jobs,
        metavar="N",
        help="how many jobs to run (default: %(default)s)",
    )
    demo.add_argument(
        "--speed",
        type=_speed,
        default=_demo.DemoOptions.speed,
        metavar="FACTOR",
        help="divide every duration by FACTOR (default: %(default)s)",
    )
    demo.add_argument(
        "--dashboard-port",
        type=_dashboard.port,
        default=_dashboard.DEFAULT_PORT,
        metavar="PORT",
        help="serve the dashboard on 127.0.0.1:PORT while the demo runs, or on a free port "
        "when that one is taken (default: %(default)s)",
    )
    demo.add_argument(
        "--no-dashboard", dest="dashboard", action="store_false", help="do not start the dashboard"
    )
    demo.add_argument(
        "--keep-dashboard",
        action="store_true",
        help="after the summary, keep the dashboard (and the finished jobs) up until Ctrl-C",
    )
    demo.add_argument(
        "--no-live",
        dest="live",
        action="store_false",
        help="print a line per state change instead of redrawing a table",
    )


def _run_demo(args: argparse.Namespace) -> int:
    options = _demo.DemoOptions(
        jobs=args.jobs,
        speed=args.speed,
        live=args.live,
        verbose=args.verbose,
        log_level=log_level(args),
        backend=args.backend,
        schema=schema_of(args, _demo.SCHEMA),
        dashboard_port=args.dashboard_port if args.dashboard else None,
        keep_dashboard=args.keep_dashboard and args.dashboard,
    )
    if args.backend == "memory":
        return _demo_on(options)
    dsn = resolve_dsn(args)
    if dsn is not None:
        return _demo_on(_with_dsn(options, dsn, "your server"))
    say("starting an embedded PostgreSQL server (pgserver) ...", file=sys.stderr)
    try:
        with _embedded.embedded_postgres() as embedded:
            return _demo_on(_with_dsn(options, embedded, "embedded"))
    except _embedded.EmbeddedPostgresError as exc:
        raise CliError(str(exc), EXIT_FAILED) from exc


def _with_dsn(options: _demo.DemoOptions, dsn: str, where: str) -> _demo.DemoOptions:
    """``options`` on the server at ``dsn``, named ``where`` in the demo's header."""
    return dataclasses.replace(options, dsn=dsn, where=where)


def _demo_on(options: _demo.DemoOptions) -> int:
    """Run the demo; its exit code."""
    with errors_as_cli_errors():
        code: int = trio.run(_demo.run_demo, options, sys.stdout)
    return code


def _speed(text: str) -> float:
    """An argparse type: a finite speed factor in (0, MAX_SPEED]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= _demo.MAX_SPEED):
        raise argparse.ArgumentTypeError(
            f"must be above 0 and at most {_demo.MAX_SPEED:g}, got {text}"
        )
    return value
