"""The ``trioqueue`` command (also ``python -m trioqueue``).

Each subcommand is a pair of functions: ``_add_<name>(commands)`` declares its arguments on
the shared subparsers, and sets ``run``, a function of the parsed arguments that returns the
exit code. :func:`main` parses, dispatches, and turns Ctrl-C into exit code 130. Options every
subcommand takes (``-v``) come from :func:`_common_options`, passed as an argparse parent.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence

import trio

import trioqueue
from trioqueue import _demo

Runner = Callable[[argparse.Namespace], int]

EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Raises:
        SystemExit: for ``--help``, ``--version`` and usage errors (code 2), as argparse does.
    """
    args = build_parser().parse_args(argv)
    run: Runner = args.run
    try:
        return run(args)
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        if not _only_interrupts(exc):
            raise
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _only_interrupts(exc: BaseException) -> bool:
    """True for Ctrl-C, also when trio delivers it inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_interrupts(inner) for inner in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="trioqueue",
        description="A PostgreSQL-backed job queue for trio.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {trioqueue.__version__}")
    commands = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", required=True
    )
    _add_demo(commands)
    return parser


def _common_options() -> argparse.ArgumentParser:
    """Options every subcommand accepts, as an argparse parent."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="store_true", help="show the library's info log lines"
    )
    return common


# -- demo ---------------------------------------------------------------------------------


def _add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo",
        parents=[_common_options()],
        help="run a small workload and watch it live",
        description=(
            "Run a small, realistic workload (reports with progress, a job that fails once "
            "and succeeds on its retry, a long job cancelled mid-run) and watch the stored "
            "state of every job. Exits 0 when every job ended as expected."
        ),
    )
    demo.add_argument(
        "--backend",
        choices=["memory"],
        default="memory",
        help="where the jobs live (default: %(default)s, in-process, no database)",
    )
    demo.add_argument(
        "--jobs",
        type=_bounded_int(_demo.MIN_JOBS, _demo.MAX_JOBS),
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
        "--no-live",
        dest="live",
        action="store_false",
        help="print a line per state change instead of redrawing a table",
    )
    demo.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    options = _demo.DemoOptions(
        jobs=args.jobs, speed=args.speed, live=args.live, verbose=args.verbose
    )
    return trio.run(_demo.run_demo, options, sys.stdout)


# -- argument types -----------------------------------------------------------------------


def _bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


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
