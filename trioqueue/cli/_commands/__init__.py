"""The ``trioqueue`` command (``trioqueue.cli.main``, also ``python -m trioqueue``): the
parser built from the command groups, and :func:`main`.

Each command group is a module of this package that owns its parser and its run function:
``add(commands)`` declares its subcommands on the shared subparsers, each setting ``run``, a
function of the parsed arguments that returns the exit code. The database work of each
command is an async function of its own (``migrate``, ``enqueue``, ``serve_worker``, ...),
which tests may call directly. What the groups share (the common options, the DSN, errors as
exit codes) is in ``common.py``.

- ``migrate.py``: ``migrate``.
- ``worker.py``, ``worker_imports.py``: ``worker``, and what it imports by name (handlers,
  mappings, hooks, ``--resources``).
- ``enqueue.py``: ``enqueue``.
- ``job.py``, ``show.py``: the commands on one job, ``cancel``, ``retry``, ``delete``; and
  ``show``, with its attempts. ``matching.py``: ``retry`` / ``delete --all-matching``, with
  the filters of ``filters.py`` (which ``jobs`` shares).
- ``queue.py``: ``queue pause|resume|limits``.
- ``status.py``, ``jobs.py``: ``status`` and ``jobs`` (``--watch``).
- ``dead.py``: ``dead`` (the dead letters, counted and listed) and ``dead redrive``.
- ``audit.py``, ``tables.py``: ``audit`` (the dashboard's audit log) and ``tables``
  (table health).
- ``retention.py``, ``prune.py``: ``retention [set|clear|audit]`` (how long finished jobs
  and audit entries are kept, and the maintainer) and ``prune`` (one pass of it by hand).
- ``schedule.py``, ``dashboard.py``, ``demo.py``: the subcommands of those names, whose work
  lives in ``trioqueue/cli/_schedule.py``, ``_dashboard.py`` and ``_demo.py``.

:func:`main` parses, dispatches and turns errors into exit codes, with one clear line on
stderr and no traceback: a usage problem found after parsing (no DSN, bad JSON, an invalid
worker configuration, a handler that cannot be imported) exits 2, like argparse's own usage
errors; a failure of the database or an unknown job exits 1, with a hint chosen by the
server's error (:func:`~trioqueue.cli._commands.common.database_hint`); Ctrl-C exits 130, and
so does a worker stopped at once by a second signal. Errors that trio delivers inside
exception groups are unwrapped.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

import trioqueue
from trioqueue._errors import exit_request
from trioqueue.cli import _broken_pipe
from trioqueue.cli._commands import (
    audit,
    dashboard,
    dead,
    demo,
    enqueue,
    job,
    jobs,
    migrate,
    prune,
    queue,
    retention,
    schedule,
    show,
    status,
    tables,
    worker,
)
from trioqueue.cli._commands.common import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CliError,
    Runner,
    add_database_options,
    only_interrupts,
)
from trioqueue.cli._worker_lines import JsonLines, say_ending


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    A reader that closes the output early (``| head -1``) ends the command quietly, with
    exit 141 (``trioqueue/cli/_broken_pipe.py``).

    Raises:
        SystemExit: for ``--help``, ``--version`` and usage errors (code 2), as argparse does.
    """
    try:
        return _parse_and_run(argv)
    except (BrokenPipeError, BaseExceptionGroup) as exc:
        if not _broken_pipe.is_broken_pipe(exc):
            raise
        return _broken_pipe.quiet_exit()


def _parse_and_run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(json_errors=_wants_json_log(words)).parse_args(words)
    run: Runner = args.run
    try:
        return run(args)
    except CliError as exc:
        say_ending(args, f"trioqueue {args.command}: error: ", str(exc), "error")
        return exc.code
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        asked = exit_request(exc)
        if isinstance(asked, SystemExit):
            # A handler's sys.exit(), its attempt already recorded (docs/protocol.rst
            # §4.1): the process exits as it asks, not with trio's groups' traceback.
            raise asked from None
        if not only_interrupts(exc):
            raise
        say_ending(args, "", "interrupted", "interrupted")
        return EXIT_INTERRUPTED


def _wants_json_log(words: Sequence[str]) -> bool:
    """Whether ``words`` ask for ``--log-format json`` (also ``=json``, or the option
    abbreviated as argparse allows), looked for before parsing, so that a usage error is
    a JSON record too; a ``--`` ends the options."""
    for word, following in zip(words, [*words[1:], ""], strict=False):  # unequal only when empty
        if word == "--":
            return False
        name, equals, value = word.partition("=")
        if len(name) > len("--log-") and "--log-format".startswith(name):
            return (value if equals else following) == "json"
    return False


class _JsonErrorsParser(argparse.ArgumentParser):
    """A parser whose usage error is one JSON record on stderr (``--log-format json``),
    as every other line the worker writes then is; the subcommands' parsers are of the
    parser's own class, so theirs are too. The exit code stays argparse's 2."""

    def error(self, message: str) -> NoReturn:
        JsonLines(sys.stderr).say(f"{self.prog}: {message}", "error", logging.ERROR)
        self.exit(EXIT_USAGE)


def build_parser(*, json_errors: bool = False) -> argparse.ArgumentParser:
    """The parser of every subcommand; with ``json_errors``, one that reports a usage
    error as a JSON record (:class:`_JsonErrorsParser`) rather than argparse's text."""
    parser_class = _JsonErrorsParser if json_errors else argparse.ArgumentParser
    parser = parser_class(prog="trioqueue", description="A PostgreSQL-backed job queue for trio.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {trioqueue.__version__}")
    add_database_options(parser, default=None)
    commands = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", required=True
    )
    groups = (migrate, worker, enqueue, job, show, queue, status, jobs, dead, schedule)
    for group in (*groups, audit, tables, retention, prune, dashboard, demo):
        group.add(commands)
    return parser
