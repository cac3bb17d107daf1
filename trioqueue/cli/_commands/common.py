"""What every command group shares: exit codes, :class:`CliError`, the common options, the
DSN, and the library's errors turned into one line and an exit code.

Options every subcommand accepts (``-v``, ``--dsn``, ``--schema``) come from
:func:`common_options`, an argparse parent, and are accepted before the subcommand too
(``trioqueue --dsn ... jobs``). The DSN is ``--dsn``, else ``TRIOQUEUE_DSN``; only ``demo``
goes on without one, on an embedded server it starts and stops
(``trioqueue._backends.postgres.embedded``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias, get_args

import trio

import trioqueue
from trioqueue._errors import causes, leaves
from trioqueue.cli._terminal import JsonLogFormatter, TextLogFormatter, library_logs_to
from trioqueue.cli._worker_lines import LOG_LEVELS, log_level

Runner = Callable[[argparse.Namespace], int]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: The environment variable holding the DSN when ``--dsn`` is not given.
DSN_ENV = "TRIOQUEUE_DSN"
#: The worker's LISTEN DSN when ``--listen-dsn`` is not given (docs/pgbouncer.rst).
LISTEN_DSN_ENV = "TRIOQUEUE_LISTEN_DSN"
#: The read replica's DSN when ``--read-dsn`` is not given (docs/postgres.rst, "Read replicas").
READ_DSN_ENV = "TRIOQUEUE_READ_DSN"
DEFAULT_SCHEMA = "trioqueue"
# The public JobStatus literal, in its order (scheduled ... failed): the columns of `status`.
JOB_STATUSES: tuple[str, ...] = get_args(trioqueue.JobStatus)


class CliError(Exception):
    """A problem to report in one line and exit with ``code`` (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def only_interrupts(exc: BaseException) -> bool:
    """True for Ctrl-C, also when trio delivers it inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return all(only_interrupts(inner) for inner in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)


def add_database_options(
    parser: argparse.ArgumentParser, default: Any, schema: str = DEFAULT_SCHEMA
) -> None:
    """``--dsn`` and ``--schema`` on ``parser``, both defaulting to ``default``; ``schema``
    is the schema the command uses when none is given (the help says so)."""
    parser.add_argument(
        "--dsn", default=default, help=f"PostgreSQL connection URI (default: ${DSN_ENV})"
    )
    parser.add_argument(
        "--schema",
        default=default,
        help=f"the schema holding trioqueue's tables (default: {schema})",
    )


def common_options(schema: str = DEFAULT_SCHEMA) -> argparse.ArgumentParser:
    """Options every subcommand accepts, as an argparse parent."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="store_true", help="show the library's info log lines"
    )
    common.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help="show the library's log records of LEVEL and worse: "
        f"{', '.join(LOG_LEVELS)} (default: warning, or info with -v)",
    )
    # SUPPRESS: when given only before the subcommand, the main parser's value stands.
    add_database_options(common, default=argparse.SUPPRESS, schema=schema)
    return common


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def subcommand(
    commands: Subparsers,
    name: str,
    run: Runner,
    help: str,
    description: str | None = None,
    *,
    schema: str = DEFAULT_SCHEMA,
) -> argparse.ArgumentParser:
    """Declare subcommand ``name`` (with the common options), run by ``run``; ``schema`` is
    the schema it works in by default."""
    parser = commands.add_parser(
        name, parents=[common_options(schema)], help=help, description=description or help
    )
    parser.set_defaults(run=run)
    return parser


# -- where the jobs live -----------------------------------------------------------------


def resolve_dsn(args: argparse.Namespace) -> str | None:
    """``--dsn``, else ``$TRIOQUEUE_DSN``, else None."""
    dsn: str | None = args.dsn or os.environ.get(DSN_ENV) or None
    return dsn


def add_read_dsn_option(parser: argparse.ArgumentParser) -> None:
    """``--read-dsn``, for the commands that only read (``status``, ``jobs``, ``show``,
    ``dashboard``)."""
    parser.add_argument(
        "--read-dsn",
        metavar="DSN",
        help="a streaming replica of --dsn's database: the reads that may be a little old go "
        f"there, and to --dsn while it is down (default: ${READ_DSN_ENV})",
    )


def resolve_read_dsn(args: argparse.Namespace) -> str | None:
    """``--read-dsn``, else ``$TRIOQUEUE_READ_DSN``, else None (no replica)."""
    dsn: str | None = getattr(args, "read_dsn", None) or os.environ.get(READ_DSN_ENV) or None
    return dsn


def read_replica(read_dsn: str | None) -> dict[str, Any]:
    """``open_postgres``'s options for a one-shot command reading ``read_dsn`` (nothing
    without one): one replica connection, as the command uses one on the primary."""
    return {} if read_dsn is None else {"read_dsn": read_dsn, "max_read_connections": 1}


def require_dsn(args: argparse.Namespace) -> str:
    """The DSN, or a usage error that says how to give one."""
    dsn = resolve_dsn(args)
    if dsn is None:
        raise CliError(f"no database given: pass --dsn postgresql://USER@HOST/DB or set {DSN_ENV}")
    return dsn


def schema_of(args: argparse.Namespace, default: str = DEFAULT_SCHEMA) -> str:
    """``--schema``, else ``default``. An empty ``--schema ''`` stays empty, so that
    ``open_postgres`` refuses it rather than the default being used unasked."""
    schema: str = default if args.schema is None else args.schema
    return schema


def run_on_database(args: argparse.Namespace, fn: Callable[..., Any], *fn_args: Any) -> Any:
    """``trio.run(fn, dsn, schema, *fn_args)``, with database and input errors as CliError."""
    dsn = require_dsn(args)
    schema = schema_of(args)
    with (
        library_logs_to(
            stderr_log_handler(getattr(args, "log_format", "text")), level=log_level(args)
        ),
        errors_as_cli_errors(schema),
    ):
        return trio.run(fn, dsn, schema, *fn_args)


@contextmanager
def errors_as_cli_errors(schema: str | None = None) -> Iterator[None]:
    """The library's errors as :class:`CliError`: bad input exits 2, the database 1.

    trio delivers an error of a task inside (nested) exception groups: a group whose every
    leaf is such an error is reported as those errors, one line each (usually just one).
    ``schema`` goes into the hint for a schema that was never migrated.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        found = list(leaves(group))
        errors = [_as_cli_error(leaf, schema) for leaf in found]
        if not all(errors):
            raise
        messages = dict.fromkeys(str(error) for error in errors)  # once each, in order
        code = max(error.code for error in errors if error is not None)
        raise CliError("\n".join(messages), code) from found[0]
    except Exception as exc:
        error = _as_cli_error(exc, schema)
        if error is None:
            raise
        raise error from exc


def _as_cli_error(exc: BaseException, schema: str | None) -> CliError | None:
    """``exc`` as the one-line error the command line prints, or None for anything else."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, trioqueue.ConfigError):
        return CliError(str(exc))
    if isinstance(exc, trioqueue.UnknownJobError):
        return CliError(str(exc), EXIT_FAILED)
    if isinstance(exc, trioqueue.UnknownDependencyError):  # bad input: nothing was written
        return CliError(f"{exc}; nothing was enqueued")
    if isinstance(exc, trioqueue.BackendError):
        hint = database_hint(exc, schema)
        return CliError(str(exc) + (f"; {hint}" if hint else ""), EXIT_FAILED)
    if isinstance(exc, (TypeError, ValueError)):  # the library's checks of names, ids, options
        return CliError(str(exc))
    return None


def database_hint(exc: BaseException, schema: str | None = None) -> str | None:
    """What to check for a database error: the backend's hint (``BackendError.hint``), unless
    the message says it already. Only a missing schema, table or function of ours suggests
    migrating (an unknown database or role also "does not exist", and migrating would not
    help there); the command line then names the schema to migrate.
    """
    hints = (e.hint for e in causes(exc) if isinstance(e, trioqueue.BackendError) and e.hint)
    hint = next(hints, None)
    if hint is None or hint in str(exc):
        return None
    if schema is not None and "`trioqueue migrate`" in hint:
        return f"has the schema been migrated? run: trioqueue migrate --schema {schema}"
    return hint


#: ``--log-format`` (of ``worker``): how the library's records are written to stderr.
LOG_FORMATS = ("text", "json")


#: Pool log events whose message the command prints again as its own last line (the
#: error that stopped the pool): in text, the log line would only say it twice.
SAID_BY_THE_CLI = frozenset({"stopped_claims_fail"})


def _not_said_again(record: logging.LogRecord) -> bool:
    return getattr(record, "event", None) not in SAID_BY_THE_CLI


def stderr_log_handler(log_format: str = "text") -> logging.Handler:
    """A handler writing to stderr: a line of text per record, or one JSON object (every
    record: a log pipeline wants the stop as an event too)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(TextLogFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_not_said_again)
    return handler


# -- argument types -----------------------------------------------------------------------


def job_id_type(text: str) -> int:
    """An argparse type: a job id (a whole number)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a job id: {text!r}") from None


def bounded_int(low: int, high: int) -> Callable[[str], int]:
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
