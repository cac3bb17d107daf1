"""The ``trioqueue`` command's subcommands (``trioqueue.cli.main``, also ``python -m trioqueue``).

Each subcommand is a pair of functions: ``_add_<name>(commands)`` declares its arguments on
the shared subparsers, and sets ``run``, a function of the parsed arguments that returns the
exit code. The database work of each command is an async function of its own (``migrate``,
``enqueue``, ``serve_worker``, ...), which tests may call directly.

:func:`main` parses, dispatches and turns errors into exit codes, with one clear line on
stderr and no traceback: a usage problem found after parsing (no DSN, bad JSON, an invalid
worker configuration, a handler that cannot be imported) exits 2, like argparse's own usage
errors; a failure of the database or an unknown job exits 1, with a hint chosen by the
server's error (:func:`database_hint`); Ctrl-C exits 130, and so does a worker stopped at
once by a second signal. Errors that trio delivers inside exception groups are unwrapped.

Options every subcommand takes (``-v``, ``--dsn``, ``--schema``) come from
:func:`_common_options`, an argparse parent, and are accepted before the subcommand too
(``trioqueue --dsn ... jobs``). The DSN is ``--dsn``, else ``TRIOQUEUE_DSN``; only ``demo``
goes on without one, on an embedded server it starts and stops
(``trioqueue._backends.postgres.embedded``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime
import functools
import importlib
import importlib.util
import json
import logging
import math
import os
import signal
import sys
import sysconfig
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager
from typing import Any, NoReturn, TextIO, TypeAlias, get_args

import trio

import trioqueue
from trioqueue._backends.postgres import embedded as _embedded
from trioqueue._errors import causes, exit_request, leaves
from trioqueue._runtime.config import problems_of
from trioqueue.cli import _broken_pipe, _dashboard, _demo, _schedule, _watch
from trioqueue.cli._escape import say, visible, visible_lines
from trioqueue.cli._install import install_hint
from trioqueue.cli._terminal import (
    JsonLogFormatter,
    LiveBlock,
    TextLogFormatter,
    check_migrated,
    clip,
    format_age,
    format_table,
    library_logs_to,
    marked_if_cut,
    stop_on_signals,
    supports_unicode,
    wants_colour,
)
from trioqueue.cli._words import CLOCK_FLAGS, LIVE, STALE, job_is
from trioqueue.cli._worker_defaults import CONCURRENCY_HELP, default_concurrency, default_help
from trioqueue.cli._worker_lines import (
    LOG_LEVELS,
    JsonLines,
    WorkerOut,
    log_level,
    say_ending,
    say_line,
)

Runner = Callable[[argparse.Namespace], int]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: The environment variable holding the DSN when ``--dsn`` is not given.
DSN_ENV = "TRIOQUEUE_DSN"
#: The worker's LISTEN DSN when ``--listen-dsn`` is not given (docs/pgbouncer.rst).
LISTEN_DSN_ENV = "TRIOQUEUE_LISTEN_DSN"
DEFAULT_SCHEMA = "trioqueue"
# The public JobStatus literal, in its order (scheduled ... failed): the columns of `status`.
JOB_STATUSES: tuple[str, ...] = get_args(trioqueue.JobStatus)
#: How many characters of each payload, result and error ``jobs`` reads (``list_jobs``'
#: ``preview``): its columns show 40; ``show ID`` reads the whole job.
LIST_PREVIEW = 200


class CliError(Exception):
    """A problem to report in one line and exit with ``code`` (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


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
        if not _only_interrupts(exc):
            raise
        say_ending(args, "", "interrupted", "interrupted")
        return EXIT_INTERRUPTED


def _only_interrupts(exc: BaseException) -> bool:
    """True for Ctrl-C, also when trio delivers it inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_interrupts(inner) for inner in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)


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
    parser = parser_class(
        prog="trioqueue",
        description="A PostgreSQL-backed job queue for trio.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {trioqueue.__version__}")
    _add_database_options(parser, default=None)
    commands = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", required=True
    )
    for add in (
        _add_migrate,
        _add_worker,
        _add_enqueue,
        _add_cancel,
        _add_job_commands,
        _add_show,
        _add_queue,
        _add_status,
        _add_jobs,
        _add_schedule,
        _add_dashboard,
        _add_demo,
    ):
        add(commands)
    return parser


def _add_database_options(
    parser: argparse.ArgumentParser, default: Any, schema: str = DEFAULT_SCHEMA
) -> None:
    """``--dsn`` and ``--schema`` on ``parser``, both defaulting to ``default``; ``schema``
    is the schema the command uses when none is given (the help says so)."""
    parser.add_argument(
        "--dsn",
        default=default,
        help=f"PostgreSQL connection URI (default: ${DSN_ENV})",
    )
    parser.add_argument(
        "--schema",
        default=default,
        help=f"the schema holding trioqueue's tables (default: {schema})",
    )


def _common_options(schema: str = DEFAULT_SCHEMA) -> argparse.ArgumentParser:
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
    _add_database_options(common, default=argparse.SUPPRESS, schema=schema)
    return common


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _subcommand(
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
        name, parents=[_common_options(schema)], help=help, description=description or help
    )
    parser.set_defaults(run=run)
    return parser


# -- where the jobs live -----------------------------------------------------------------


def resolve_dsn(args: argparse.Namespace) -> str | None:
    """``--dsn``, else ``$TRIOQUEUE_DSN``, else None."""
    dsn: str | None = args.dsn or os.environ.get(DSN_ENV) or None
    return dsn


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
            _stderr_log_handler(getattr(args, "log_format", "text")), level=log_level(args)
        ),
        _errors_as_cli_errors(schema),
    ):
        return trio.run(fn, dsn, schema, *fn_args)


@contextmanager
def _errors_as_cli_errors(schema: str | None = None) -> Iterator[None]:
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


def _stderr_log_handler(log_format: str = "text") -> logging.Handler:
    """A handler writing to stderr: a line of text per record, or one JSON object (every
    record: a log pipeline wants the stop as an event too)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(TextLogFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_not_said_again)
    return handler


# -- migrate ------------------------------------------------------------------------------


def _add_migrate(commands: Subparsers) -> None:
    _subcommand(
        commands, "migrate", _run_migrate, "create the schema or bring it up to date (idempotent)"
    )


def _run_migrate(args: argparse.Namespace) -> int:
    applied: list[str] = run_on_database(args, migrate)
    if applied:
        say(f"schema {schema_of(args)}: applied {', '.join(applied)}")
    else:
        say(f"schema {schema_of(args)} is already up to date")
    return 0


async def migrate(dsn: str, schema: str) -> list[str]:
    """Create ``schema`` or bring it up to date; the migrations applied."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.migrate()


# -- worker -------------------------------------------------------------------------------


def _add_worker(commands: Subparsers) -> None:
    worker = _subcommand(
        commands,
        "worker",
        _run_worker,
        "run worker pools until Ctrl-C (or SIGTERM), then shut them down gracefully",
        description=(
            "Run one worker pool per queue in this process, all on one backend: "
            "MODULE:HANDLER --queue Q (one queue), --queue Q=MODULE:HANDLER (repeatable), "
            "or MODULE:MAPPING naming a mapping {queue: handler or WorkerConfig}; the forms "
            "combine. The pool options apply to every pool built from a handler; a "
            "WorkerConfig in the mapping is used as it is."
        ),
    )
    worker.add_argument(
        "handler",
        nargs="?",
        metavar="MODULE:HANDLER",
        help="the handler, async def handler(payload, ctx), e.g. myapp.jobs:send_email, with "
        "--queue Q; without a plain --queue, a mapping {queue: handler or WorkerConfig}",
    )
    worker.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="Q[=MODULE:HANDLER]",
        help="the queue of MODULE:HANDLER; or, repeatable, a queue and its own handler",
    )
    pool = worker.add_argument_group("pool options (docs/configuration.rst)")
    pool.add_argument("--concurrency", type=int, metavar="N", help=CONCURRENCY_HELP)
    pool.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help=default_help("batch_size", "jobs claimed per batch"),
    )
    for option, field, kind, meaning in (
        ("--visibility-timeout", "visibility_timeout", float, "lease length"),
        ("--heartbeat-interval", "heartbeat_interval", _heartbeat, "renewal cadence, or auto"),
        ("--max-job-duration", "max_job_duration", float, "longest a handler may run"),
        ("--poll-interval", "poll_interval", float, "look for work this often without notices"),
        ("--shutdown-grace", "shutdown_grace", float, "on shutdown, how long handlers go on"),
        ("--blocking-threshold", "blocking_threshold", float,
         "log an async handler step longer than this as blocking the event loop"),
        ("--schedule-interval", "schedule_interval", _schedule_interval,
         "make a scheduling pass this often, or off: no part in scheduling"),
    ):  # fmt: skip
        pool.add_argument(option, type=kind, metavar="S", help=default_help(field, meaning))
    pool.add_argument(
        "--quarantine-after",
        type=_quarantine_after,
        metavar="N",
        help=default_help(
            "quarantine_after",
            "run a job alone once its last N attempts each ended without an outcome (its "
            "worker died), and fail it if that run does too, or off (docs/protocol.rst §13)",
        ),
    )
    pool.add_argument(
        "--transactional",
        action="store_const",
        const=True,
        help=default_help(
            "transactional", "give handlers ctx.connection, committed together with the job's ack"
        ),
    )
    pool.add_argument(
        "--backoff",
        metavar="MODULE:ATTR",
        help="the retry delay policy, backoff(attempt) -> seconds (not with --backoff-*; "
        "default: ExponentialBackoff() with the numbers below)",
    )
    for name, meaning in BACKOFF_OPTIONS.items():
        pool.add_argument(f"--backoff-{name}", type=float, metavar="X", help=meaning)
    for hook in HOOKS:
        pool.add_argument(
            "--" + hook.replace("_", "-"),
            metavar="MODULE:ATTR",
            help=f"the {hook} hook (default: none)",
        )
    worker.add_argument(
        "--resources",
        metavar="MODULE:ATTR",
        help="an async context manager factory (e.g. an @asynccontextmanager function): "
        "entered before the pools start, exited after they stop; it yields ctx.resources",
    )
    worker.add_argument(
        "--listen-dsn",
        help="where to LISTEN for wake-ups, when --dsn is a transaction pooler "
        f"(default: ${LISTEN_DSN_ENV}, else --dsn)",
    )
    worker.add_argument(
        "--metrics-port",
        type=int,
        metavar="N",
        help="serve Prometheus metrics on http://HOST:N/metrics (needs the metrics extra; "
        "default: none)",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address --metrics-port binds, 0.0.0.0 for any (default: %(default)s)",
    )
    worker.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="the library's log records on stderr: lines of text, or one JSON object per "
        "line, the worker's own lines and its error among them (default: %(default)s)",
    )


#: ``worker`` options passed to WorkerConfig when given (argparse dest -> field).
WORKER_OPTIONS = (
    "concurrency",
    "batch_size",
    "visibility_timeout",
    "heartbeat_interval",
    "max_job_duration",
    "poll_interval",
    "shutdown_grace",
    "blocking_threshold",
    "schedule_interval",
    "quarantine_after",
    "transactional",
)
#: ``--backoff-NAME``: the fields of ``ExponentialBackoff`` (docs/configuration.rst).
BACKOFF_OPTIONS = {
    "initial": "retry delay after the first failed attempt, in seconds (default: 1)",
    "base": "growth of the delay per attempt (default: 2)",
    "cap": "largest retry delay, in seconds (default: 300)",
    "jitter": "relative spread of each delay, in [0, 1] (default: 0.1)",
}
#: The hooks of WorkerConfig, each an option ``--on-job-...`` naming an async function.
HOOKS = (
    "on_job_claimed",
    "on_job_unavailable",
    "on_job_succeeded",
    "on_job_failed",
    "on_job_retry",
)

#: What a pool works with: a handler, or a whole config from a mapping.
PoolSpec: TypeAlias = "Callable[..., Any] | trioqueue.WorkerConfig"
#: One config, or several (one pool each).
Configs: TypeAlias = "trioqueue.WorkerConfig | Sequence[trioqueue.WorkerConfig]"


def _run_worker(args: argparse.Namespace) -> int:
    configs = worker_configs(args)
    resources = None if args.resources is None else ReportedResources(args.resources)
    listen_dsn = args.listen_dsn or os.environ.get(LISTEN_DSN_ENV) or None
    metrics = None
    if args.metrics_port is not None:
        if importlib.util.find_spec("prometheus_client") is None:
            raise CliError(f"--metrics-port needs prometheus-client; {install_hint('metrics')}")
        metrics = (args.metrics_host, args.metrics_port)
    work = functools.partial(run_worker, listen_dsn=listen_dsn, metrics=metrics)
    if resources is not None:  # only when given: stand-ins of serve_worker need not know it
        work = functools.partial(work, resources=resources)
    # One pool goes as its config alone, as before several could run (serve_worker takes
    # either).
    pools: Configs = configs[0] if len(configs) == 1 else configs
    out: WorkerOut = JsonLines(sys.stderr) if args.log_format == "json" else sys.stdout
    stopped_at_once = run_on_database(args, work, pools, out)
    return EXIT_INTERRUPTED if stopped_at_once else 0


def worker_configs(args: argparse.Namespace) -> list[trioqueue.WorkerConfig]:
    """The pools ``worker`` runs, one config per queue, checked before connecting.

    Raises:
        CliError: nothing to work on, a queue given twice, a handler, hook or mapping that
            does not import or is of the wrong kind, or every problem of the configs.
    """
    specs = pool_specs(args.handler, args.queue)
    options = worker_options(args)
    configs = [
        spec if isinstance(spec, trioqueue.WorkerConfig)
        else trioqueue.WorkerConfig(
            handler=spec, queue=queue, **({"concurrency": default_concurrency(spec)} | options)
        )
        for queue, spec in specs
    ]  # fmt: skip
    problems = [
        f"queue {config.queue!r}: {problem}" if len(configs) > 1 else problem
        for config in configs
        for problem in problems_of(config)
    ]
    if problems:  # every problem at once, before connecting
        raise CliError(str(trioqueue.ConfigError(problems)))
    return configs


def pool_specs(target: str | None, queues: Sequence[str]) -> list[tuple[str, PoolSpec]]:
    """``(queue, handler or config)`` per pool, from the ``MODULE:HANDLER`` argument and
    the ``--queue`` options, in the order given.

    ``--queue Q`` (no ``=``) names the queue of ``MODULE:HANDLER``; without one, that
    argument names a mapping. ``--queue Q=MODULE:HANDLER`` adds a pool of its own.
    """
    plain = [queue for queue in queues if "=" not in queue]
    pairs = [queue.partition("=") for queue in queues if "=" in queue]
    specs: list[tuple[str, PoolSpec]] = []
    if len(plain) > 1:
        raise CliError(
            f"--queue {plain[0]} and --queue {plain[1]}: MODULE:HANDLER works on one queue; "
            "give each other queue its handler, --queue Q=MODULE:HANDLER"
        )
    if plain and target is None:
        raise CliError(f"--queue {plain[0]} needs a handler: MODULE:HANDLER --queue {plain[0]}")
    if plain and target is not None:
        specs.append((plain[0], import_handler(target)))
    elif target is not None:
        specs.extend(import_mapping(target).items())
    for queue, _, spec in pairs:
        specs.append((queue, import_handler(spec)))
    if not specs:
        raise CliError(
            "nothing to work on: give MODULE:HANDLER --queue Q, --queue Q=MODULE:HANDLER "
            "(repeatable), or MODULE:MAPPING"
        )
    counts = collections.Counter(queue for queue, _ in specs)
    twice = [queue for queue, count in counts.items() if count > 1]
    if twice:
        raise CliError(f"queue {twice[0]!r} is given twice: one pool per queue")
    return specs


def import_mapping(spec: str) -> dict[str, PoolSpec]:
    """The mapping ``{queue: handler or WorkerConfig}`` named by ``MODULE:ATTR``.

    A WorkerConfig's queue is its key; one that names another queue is refused.

    Raises:
        CliError: it does not import, is not a non-empty mapping of queue names to
            callables or WorkerConfigs, or a config's queue disagrees with its key.
    """
    target = import_object(spec, "the mapping", "MAPPING")
    if not isinstance(target, Mapping):
        if callable(target):
            raise CliError(f"{spec} is a handler: name its queue, {spec} --queue Q")
        raise CliError(
            f"{spec} must be a mapping of queue names to handlers or WorkerConfigs, "
            f"not {type(target).__name__}"
        )
    if not target:
        raise CliError(f"{spec} is an empty mapping: no queue to work on")
    specs: dict[str, PoolSpec] = {}
    for queue, value in target.items():
        if not isinstance(queue, str):
            raise CliError(f"{spec}: queue names must be strings, got {queue!r}")
        if isinstance(value, trioqueue.WorkerConfig):
            if value.queue not in (queue, DEFAULT_QUEUE):
                raise CliError(
                    f"{spec}[{queue!r}] is a WorkerConfig for queue {value.queue!r}: "
                    "make the key and its queue agree"
                )
            specs[queue] = dataclasses.replace(value, queue=queue)
        elif callable(value):
            specs[queue] = value
        else:
            raise CliError(
                f"{spec}[{queue!r}] must be a handler (callable) or a WorkerConfig, "
                f"not {type(value).__name__}"
            )
    return specs


#: WorkerConfig's default queue: a config in a mapping that leaves it takes its key.
DEFAULT_QUEUE = "default"


def worker_options(args: argparse.Namespace) -> dict[str, Any]:
    """The WorkerConfig fields the options give (every pool built from a handler)."""
    given = {name: getattr(args, name) for name in WORKER_OPTIONS}
    options = {name: value for name, value in given.items() if value is not None}
    if options.get("schedule_interval") == OFF:
        options["schedule_interval"] = None  # given as "off", not left out
    if options.get("quarantine_after") == OFF:
        options["quarantine_after"] = None  # (the config's check refuses a bad number)
    exponential = {
        name: value
        for name in BACKOFF_OPTIONS
        if (value := getattr(args, f"backoff_{name}")) is not None
    }
    if args.backoff is not None and exponential:
        raise CliError("--backoff and --backoff-* exclude each other: the policy, or its numbers")
    if args.backoff is not None:
        options["backoff"] = import_object(args.backoff, "--backoff", "ATTR")
    elif exponential:
        options["backoff"] = trioqueue.ExponentialBackoff(**exponential)
    for hook in HOOKS:
        spec = getattr(args, hook)
        if spec is not None:
            options[hook] = import_handler(spec, "--" + hook.replace("_", "-"), "ATTR")
    return options


class ReportedResources:
    """``--resources MODULE:ATTR``: the imported factory's context manager, whose failures
    on entry or exit become one line (exit 1) instead of a traceback.

    Imported at once (a bad spec exits 2 before connecting); called and entered by
    ``run_workers``, before any pool starts.
    """

    def __init__(self, spec: str) -> None:
        target = import_object(spec, "--resources", "ATTR")
        if not (callable(target) or hasattr(target, "__aenter__")):
            raise CliError(
                f"--resources {spec} must be an async context manager or a function "
                f"returning one, not {type(target).__name__}"
            )
        self.spec = spec
        self._target = target
        self._manager: contextlib.AbstractAsyncContextManager[Any] | None = None

    async def __aenter__(self) -> Any:
        target = self._target
        try:
            manager = target if hasattr(target, "__aenter__") else target()
            if not hasattr(manager, "__aenter__"):
                raise TypeError(f"it returned {type(manager).__name__}, not a context manager")
            value = await manager.__aenter__()
        except Exception as exc:
            raise self._failed("starting", exc) from exc
        self._manager = manager
        return value

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._manager is not None  # entered
        try:
            answer: bool | None = await self._manager.__aexit__(*exc_info)
        except Exception as exc:
            if exc is exc_info[1]:
                raise  # the pools' own error, passed through
            raise self._failed("stopping", exc) from exc
        return answer

    def _failed(self, when: str, exc: Exception) -> CliError:
        return CliError(
            f"--resources {self.spec} failed {when}: {type(exc).__name__}: {exc}{_where(exc)}",
            EXIT_FAILED,
        )


def import_handler(
    spec: str, what: str = "handler", attribute: str = "HANDLER"
) -> Callable[..., Any]:
    """The callable named by ``MODULE:HANDLER`` (``HANDLER`` may be dotted).

    The current directory is importable, as with ``python -m``. ``what`` and ``attribute``
    name it in the messages (a hook: ``--on-job-failed``, ``ATTR``).

    Raises:
        CliError: the spec is malformed, the module or attribute is missing, or it is not
            callable.
    """
    target = import_object(spec, what, attribute)
    if not callable(target):
        raise CliError(f"{spec} is not callable")
    handler: Callable[..., Any] = target
    return handler


def import_object(spec: str, what: str, attribute_name: str) -> Any:
    """The object named by ``MODULE:ATTR`` (see :func:`import_handler`)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CliError(f"{what} must look like MODULE:{attribute_name}, got {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import module {module_name!r}: {exc}") from exc
    except Exception as exc:  # the module itself failed: a SyntaxError, or raised at import
        raise CliError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}{_where(exc)}"
        ) from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliError(f"module {module_name!r} has no attribute {attribute!r}") from None
    return target


def _where(exc: BaseException) -> str:
    """Where an import failed: the file and line, as far as the user's own code goes.

    A SyntaxError carries them in its message already. Otherwise it is the innermost frame
    outside the import machinery and the standard library, so that an error raised inside
    (say) ``json`` points at the user's call of it.
    """
    if isinstance(exc, SyntaxError):
        return ""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<frozen ")
    ]
    own = [frame for frame in frames if not _is_library_file(frame.filename)]
    if not (own or frames):
        return ""
    frame = (own or frames)[-1]
    return f" (at {frame.filename}, line {frame.lineno})"


def _is_library_file(filename: str) -> bool:
    """True for a file of the standard library or of an installed package."""
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    return any(filename.startswith(root + os.sep) for root in roots)


async def run_worker(
    dsn: str,
    schema: str,
    configs: Configs,
    out: WorkerOut,
    *,
    listen_dsn: str | None = None,
    metrics: tuple[str, int] | None = None,
    resources: Any = None,
) -> bool:
    """Run the pools until SIGINT or SIGTERM, then shut them down gracefully (see
    :func:`supervise_worker`); True when a second signal stopped them at once."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        serve = functools.partial(
            serve_worker, dsn, schema, listen_dsn=listen_dsn, metrics=metrics, out=out
        )
        if resources is not None:
            serve = functools.partial(serve, resources=resources)
        return await supervise_worker(serve, configs, signals, out, where=f"schema {schema}")


#: Runs the pools until cancelled: ``await serve(configs, stop_now=event, task_status=status)``.
PoolServer = Callable[..., Awaitable[None]]


async def supervise_worker(
    serve: PoolServer,
    configs: Configs,
    signals: AsyncIterator[int],
    out: WorkerOut,
    *,
    where: str,
) -> bool:
    """Serve the pools and stop them on ``signals``: the first shuts them down gracefully,
    the second ends the grace at once (running handlers are cancelled and their jobs
    released uncharged, as at the end of ``shutdown_grace``), later ones only say it is
    stopping. ``serve`` is given ``configs`` as they are.

    Returns:
        True when a second signal cut the grace short.
    """
    every = _config_list(configs)
    grace = max(config.shutdown_grace for config in every)
    pools = "worker pool" if len(every) == 1 else "worker pools"
    queues = ", ".join(repr(config.queue) for config in every)
    stop_now = trio.Event()
    async with trio.open_nursery() as nursery:
        pool = trio.CancelScope()
        await nursery.start(_pool_task, pool, nursery.cancel_scope, serve, configs, stop_now)
        on = "queue" if len(every) == 1 else "queues"
        say_line(out, f"{pools} on {on} {queues} ({where}); Ctrl-C to stop", "worker_started")
        async for signum in signals:
            name = signal.Signals(signum).name
            if not pool.cancel_called:
                say_line(
                    out,
                    f"{name}: shutting down; handlers may finish for up to "
                    f"{grace:g}s (signal again to stop at once)",
                    "shutting_down",
                )
                pool.cancel()
            elif not stop_now.is_set():
                say_line(
                    out,
                    f"{name} again: stopping at once; running handlers are cancelled and their "
                    "jobs released for another worker",
                    "stopping_at_once",
                )
                stop_now.set()
            else:
                say_line(
                    out,
                    f"{name}: already stopping at once; releasing the running jobs",
                    "already_stopping",
                )
    say_line(out, f"{pools} stopped", "worker_stopped")
    return stop_now.is_set()


def _config_list(configs: Configs) -> list[trioqueue.WorkerConfig]:
    if isinstance(configs, trioqueue.WorkerConfig):
        return [configs]
    return list(configs)


async def _pool_task(
    pool: trio.CancelScope,
    done: trio.CancelScope,
    serve: PoolServer,
    configs: Configs,
    stop_now: trio.Event,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the pools in the ``pool`` scope; when they have stopped, cancel ``done``."""
    with pool:
        await serve(configs, stop_now=stop_now, task_status=task_status)
    done.cancel()


async def serve_worker(
    dsn: str,
    schema: str,
    configs: Configs,
    *,
    listen_dsn: str | None = None,
    metrics: tuple[str, int] | None = None,
    out: WorkerOut | None = None,
    resources: Any = None,
    stop_now: trio.Event | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Open the backend and run a pool per config on it (``trioqueue.run_workers``) until
    cancelled (graceful shutdown; ``stop_now`` ends the grace at once, see
    ``run_worker_pool``). ``listen_dsn``: where to LISTEN when ``dsn`` is a transaction
    pooler (docs/pgbouncer.rst). ``metrics``: the ``(host, port)`` to serve ``/metrics`` on
    while the pools run (docs/metrics.rst); its address is written to ``out``.
    ``resources``: the async context manager (or factory) whose value handlers get as
    ``ctx.resources``, entered once the backend is open and exited before it closes."""
    every = _config_list(configs)
    async with trioqueue.open_postgres(
        dsn,
        schema=schema,
        max_connections=worker_connections(every),
        listen_dsn=listen_dsn,
    ) as backend:
        await check_migrated(backend)
        run = functools.partial(
            trioqueue.run_workers,
            backend,
            every,
            resources=resources,
            stop_now=stop_now,
            task_status=task_status,
        )
        if metrics is None:
            await run()
            return
        from trioqueue.metrics import serve_metrics  # the metrics extra: imported when asked

        host, port = metrics
        async with AsyncExitStack() as stack:
            try:
                served = await stack.enter_async_context(
                    serve_metrics(backend, host=host, port=port)
                )
            except OSError as exc:  # in use, or not an address of this machine
                where = f"{_url_host(host)}:{port}"
                raise CliError(f"cannot serve metrics on {where}: {exc}", EXIT_FAILED) from exc
            if out is not None:
                where = f"{_url_host(served.host)}:{served.port}"
                say_line(out, f"metrics on http://{where}/metrics", "metrics_serving")
            await run(observer=served.observer)


def _url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def worker_connections(configs: Configs) -> int:
    """The backend's pool size for these worker pools, which share it: per pool, the claim,
    the renewal plus one abandoned one, acks, a scheduling pass, and slack; and in
    transactional mode a connection per handler running at once (``concurrency ×
    batch_size``)."""
    return sum(
        6 + (config.concurrency * config.batch_size if config.transactional else 0)
        for config in _config_list(configs)
    )


def _number_or(word: str, number: Callable[[str], float], what: str) -> Callable[[str], Any]:
    """An argparse type: ``number(text)``, or ``word`` itself (``auto``, ``off``)."""

    def parse(text: str) -> Any:
        if text == word:
            return text
        try:
            return number(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what} or {word!r}: {text!r}") from None

    return parse


#: ``--schedule-interval off``: the pools take no part in scheduling;
#: ``--quarantine-after off``: ``quarantine_after=None``.
OFF = "off"

#: The argparse types of the pool options that take a word beside their number.
_heartbeat = _number_or("auto", float, "a number")
_schedule_interval = _number_or(OFF, float, "a number")
_quarantine_after = _number_or(OFF, int, "a whole number")


# -- enqueue ------------------------------------------------------------------------------


def _add_enqueue(commands: Subparsers) -> None:
    enqueue = _subcommand(commands, "enqueue", _run_enqueue, "add a job; prints its id")
    enqueue.add_argument("queue", metavar="QUEUE")
    enqueue.add_argument(
        "payload",
        metavar="JSON",
        help="the payload, as JSON text; - reads it from stdin, @PATH from a file",
    )
    enqueue.add_argument(
        "--priority", type=int, default=0, help="higher runs first (default: %(default)s)"
    )
    enqueue.add_argument("--delay", type=float, metavar="S", help="run no sooner than in S s")
    enqueue.add_argument(
        "--max-attempts", type=int, default=10, metavar="N", help="(default: %(default)s)"
    )
    enqueue.add_argument(
        "--dedup-key", metavar="KEY", help="skip if an unfinished job of the queue has this key"
    )
    enqueue.add_argument(
        "--group", metavar="KEY", help="run one job of this group at a time (docs/flow.rst)"
    )


def _run_enqueue(args: argparse.Namespace) -> int:
    payload = parse_payload(read_payload(args.payload, sys.stdin))
    options = {
        "priority": args.priority,
        "delay": args.delay,
        "max_attempts": args.max_attempts,
        "dedup_key": args.dedup_key,
        "group": args.group,
    }
    job_id, added = run_on_database(args, enqueue_reporting, args.queue, payload, options)
    say(str(job_id))
    if not added:
        # stdout stays the id alone, for scripts; the news goes to stderr.
        say(
            f"job {job_id} already exists with dedup key {args.dedup_key!r}; not enqueued again",
            file=sys.stderr,
        )
    return 0


def read_payload(arg: str, stdin: TextIO) -> str:
    """The payload's JSON text: ``-`` reads ``stdin``, ``@PATH`` the file PATH, anything else
    is the text itself. A JSON text never starts with ``@`` (a string starts with ``"``), so
    no literal payload is lost to this (docs/cli.rst, ``enqueue``).

    Raises:
        CliError: the file cannot be read, or stdin is empty.
    """
    if arg == "-":
        text = stdin.read()
        if not text.strip():
            raise CliError("the payload on stdin is empty; nothing was enqueued")
        return text
    if arg.startswith("@"):
        path = arg[1:]
        try:
            with open(path, encoding="utf-8") as file:
                return file.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise CliError(
                f"cannot read the payload file {path!r}: {reason}; nothing was enqueued"
            ) from None
    return arg


def parse_payload(text: str) -> Any:
    """JSON text as a payload, or a usage error naming where the JSON went wrong."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"the payload is not valid JSON: {exc}; nothing was enqueued") from None
    except RecursionError:
        # Python's parser gives up near its recursion limit (about a thousand levels).
        raise CliError(
            "the payload nests too deeply to be parsed (arrays or objects about a thousand "
            "levels deep); nothing was enqueued"
        ) from None


async def enqueue(dsn: str, schema: str, queue: str, payload: Any, options: dict[str, Any]) -> int:
    """Enqueue one job; its id (a duplicate's, with a dedup key that is taken)."""
    job_id, _ = await enqueue_reporting(dsn, schema, queue, payload, options)
    return job_id


async def enqueue_reporting(
    dsn: str, schema: str, queue: str, payload: Any, options: dict[str, Any]
) -> tuple[int, bool]:
    """Enqueue one job: its id and True, or a duplicate's id and False (nothing added)."""
    options = dict(options)
    dedup_key = options.pop("dedup_key", None)
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        if dedup_key is None:
            return await backend.enqueue(queue, payload, **options), True
        return await backend.enqueue_deduplicated(queue, payload, dedup_key=dedup_key, **options)


# -- cancel and retry ---------------------------------------------------------------------


def _add_cancel(commands: Subparsers) -> None:
    cancel = _subcommand(
        commands,
        "cancel",
        _run_cancel,
        "cancel a job: at once if it waits, via its worker if it runs",
    )
    cancel.add_argument("job_id", metavar="ID", type=_job_id)


def _run_cancel(args: argparse.Namespace) -> int:
    accepted, info = run_on_database(args, cancel, args.job_id)
    report = cancel_report(args.job_id, accepted, info)
    if not accepted:
        raise CliError(report, EXIT_FAILED)
    say(report)
    return 0


async def cancel(dsn: str, schema: str, job_id: int) -> tuple[bool, trioqueue.JobInfo]:
    """Cancel a job: whether the cancel was accepted, and the job as it is right after.

    Raises:
        UnknownJobError: no job has this id.
    """
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        accepted = await backend.cancel(job_id)
        return accepted, await backend.get_job(job_id)


def cancel_report(job_id: int, accepted: bool, info: trioqueue.JobInfo) -> str:
    """What a cancel did, from the job's state right after it.

    A job that was not running fails at once; a running one only gets the request, which
    its worker passes on to the handler (docs/protocol.rst, "Progress and cancellation").
    """
    if not accepted:
        return f"job {job_id} {job_is(info.status, already=True)}: nothing to cancel"
    if info.status == "running":
        return (
            f"job {job_id}: cancel requested; the running handler will stop at its next "
            "checkpoint, and the job then fails"
        )
    if info.status == "failed":
        return visible(f"job {job_id} cancelled at once, it was not running ({info.last_error})")
    return f"job {job_id}: cancel requested, but by now it {job_is(info.status)}"


def _add_job_commands(commands: Subparsers) -> None:
    """``retry ID`` and ``delete ID``: one operation on one job, refused by some states."""
    for name, operation, done, refused, about in (
        ("retry", trioqueue.PostgresBackend.retry, "back on its queue",
         "only a failed job can be retried",
         "put a failed job back on its queue for another attempt"),
        ("delete", trioqueue.PostgresBackend.delete_job, "deleted",
         "a running job cannot be deleted (cancel it first)",
         "delete a job that is not running (cancel it first)"),
    ):  # fmt: skip
        run = functools.partial(_on_job, operation=operation, done=done, refused=refused)
        command = _subcommand(commands, name, run, about)
        command.add_argument("job_id", metavar="ID", type=_job_id)


def _add_show(commands: Subparsers) -> None:
    """``show ID [--wait [--timeout S]]``: one job, with its result (docs/flow.rst)."""
    show = _subcommand(
        commands, "show", _run_show, "show one job: its state, error, group and result"
    )
    show.add_argument("job_id", metavar="ID", type=_job_id)
    show.add_argument(
        "--wait", action="store_true", help="wait until the job has succeeded or failed"
    )
    show.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="with --wait: give up after S seconds (exit 1); default: wait as long as it takes",
    )


def _run_show(args: argparse.Namespace) -> int:
    if args.timeout is not None and not (
        args.wait and math.isfinite(args.timeout) and args.timeout >= 0
    ):
        raise CliError("--timeout needs --wait, and a finite number of seconds >= 0")
    info, timed_out = run_on_database(args, show_job, args.job_id, args.wait, args.timeout)
    if info is None:
        raise CliError(f"no job with id {args.job_id}", EXIT_FAILED)
    say(*job_report(info))
    if timed_out:
        raise CliError(
            f"job {args.job_id} is still {info.status} after {args.timeout:g} s", EXIT_FAILED
        )
    return 0


async def show_job(
    dsn: str, schema: str, job_id: int, wait: bool, seconds: float | None
) -> tuple[trioqueue.JobInfo | None, bool]:
    """The job (None: unknown), after waiting for it to finish if asked; and whether the
    wait timed out (then the job as it is now)."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=2) as backend:
        try:
            if wait:
                try:
                    return await backend.wait_for(job_id, timeout=seconds), False
                except TimeoutError:
                    return await backend.get_job(job_id), True
            return await backend.get_job(job_id), False
        except trioqueue.UnknownJobError:
            return None, False


def job_report(info: trioqueue.JobInfo) -> list[str]:
    """``show``'s lines: a headline, then one ``name  value`` line per detail it has."""
    head = visible(
        f"job {info.id} in queue {info.queue}: {info.status} "
        f"(attempt {info.attempts} of {info.max_attempts})"
    )
    details: list[tuple[str, object]] = [
        ("payload", _json_text(info.payload)),
        ("priority", info.priority),
        ("group", info.group),
        ("created", info.created_at),
        ("finished", info.finished_at),
        ("progress", info.progress),
        ("worker", info.worker_id),
        ("cancel", info.cancel_requested_at and f"requested at {info.cancel_requested_at}"),
        ("error", info.last_error),
        ("result", None if info.status != "succeeded" else _json_text(info.result)),
    ]
    lines = [head]
    for name, value in details:
        if value is not None:
            lines += _field_lines(name, str(value))
    return lines


def _field_lines(name: str, value: str) -> list[str]:
    """``  name      value``, made visible; a value of several lines (an error with a
    traceback) goes on below, indented past every field name, so that no line of it can
    pass for a field (docs/cli.rst, ``show``)."""
    first, *more = visible_lines(value)
    return [f"  {name:<9} {first}", *(" " * 12 + line for line in more)]


def _json_text(value: Any) -> str:
    """A payload or result as JSON text (one that cannot be decoded: its stored text)."""
    if isinstance(value, trioqueue.UndecodablePayload):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


JobOperation = Callable[[trioqueue.PostgresBackend, int], Awaitable[bool]]


def _on_job(args: argparse.Namespace, *, operation: JobOperation, done: str, refused: str) -> int:
    """Run ``operation(backend, job_id)``; when it answers False, say whether the job is
    unknown or in which state it is, and why that state refuses (exit 1)."""
    accepted, status = run_on_database(args, job_operation, operation, args.job_id)
    if not accepted:
        if status is None:
            raise CliError(f"no job with id {args.job_id}", EXIT_FAILED)
        raise CliError(f"job {args.job_id} {job_is(status)}: {refused}", EXIT_FAILED)
    say(f"job {args.job_id}: {done}")
    return 0


async def job_operation(
    dsn: str, schema: str, operation: JobOperation, job_id: int
) -> tuple[bool, str | None]:
    """Run ``operation`` on one job: whether it was done, and else the job's state (None
    when no job has this id)."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        if await operation(backend, job_id):
            return True, None
        try:
            return False, (await backend.get_job(job_id)).status
        except trioqueue.UnknownJobError:
            return False, None


# -- schedules ----------------------------------------------------------------------------


def _add_schedule(commands: Subparsers) -> None:
    schedule = commands.add_parser(
        "schedule", help=_schedule.HELP, description=_schedule.DESCRIPTION
    )
    for action in _schedule.add_arguments(schedule, _common_options()).values():
        action.set_defaults(run=_run_schedule)


def _run_schedule(args: argparse.Namespace) -> int:
    if args.action == "set":
        with _errors_as_cli_errors():  # bad input exits 2 before anything connects
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


# -- queue: flow control -----------------------------------------------------------------


def _add_queue(commands: Subparsers) -> None:
    """``queue pause Q``, ``queue resume Q``, ``queue limits Q [...]`` (docs/flow.rst)."""
    queue = _subcommand(
        commands, "queue", _run_queue_help, "pause, resume or limit a queue across every pool"
    )
    actions = queue.add_subparsers(title="actions", dest="action", metavar="ACTION")
    for name, paused, about in (
        ("pause", True, "stop every pool claiming from the queue (running jobs go on)"),
        ("resume", False, "let the queue be claimed again (idle pools hear of it at once)"),
    ):
        command = _subcommand(actions, name, functools.partial(_run_pause, paused=paused), about)
        command.add_argument("queue", metavar="QUEUE")
    limits = _subcommand(
        actions,
        "limits",
        _run_limits,
        "show the queue's limits, or change them (the ones not given stay)",
    )
    limits.add_argument("queue", metavar="QUEUE")
    limits.add_argument(
        "--max-running",
        type=_limit(int),
        default=argparse.SUPPRESS,
        metavar="N|none",
        help="at most N jobs of the queue running at once across every pool; none lifts it",
    )
    limits.add_argument(
        "--max-per-second",
        type=_limit(float),
        default=argparse.SUPPRESS,
        metavar="R|none",
        help="at most R claims of the queue per second across every pool; none lifts it",
    )


def _run_queue_help(args: argparse.Namespace) -> int:
    raise CliError("queue: choose an action: pause, resume or limits (trioqueue queue --help)")


def _run_pause(args: argparse.Namespace, *, paused: bool) -> int:
    run_on_database(args, pause_queue, args.queue, paused)
    if paused:
        say(f"queue {args.queue}: paused (running jobs go on; `trioqueue queue resume` resumes)")
    else:
        say(f"queue {args.queue}: resumed")
    return 0


async def pause_queue(dsn: str, schema: str, queue: str, paused: bool) -> None:
    """Pause (``paused``) or resume ``queue``."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        if paused:
            await backend.pause_queue(queue)
        else:
            await backend.resume_queue(queue)


#: ``queue limits``'s options, as ``set_queue_limits``'s arguments.
LIMITS = ("max_running", "max_per_second")


def _run_limits(args: argparse.Namespace) -> int:
    changes = {name: getattr(args, name) for name in LIMITS if hasattr(args, name)}
    stats = run_on_database(args, queue_limits, args.queue, changes)
    say(f"queue {args.queue}: {limits_text(stats)}")
    return 0


async def queue_limits(
    dsn: str, schema: str, queue: str, changes: Mapping[str, float | None]
) -> trioqueue.QueueStats | None:
    """Apply ``changes`` to ``queue``'s limits, keeping the limits not named (the backend
    sets both at once: read, merge, set); the queue's stats after (None: unknown queue)."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        if changes:
            _, running, rate = _flow((await backend.queue_stats()).get(queue))
            limits: dict[str, Any] = {"max_running": running, "max_per_second": rate}
            await backend.set_queue_limits(queue, **(limits | dict(changes)))
        return (await backend.queue_stats()).get(queue)


def limits_text(stats: trioqueue.QueueStats | None) -> str:
    """``max_running 5, max_per_second 2.5`` (``none`` for no limit), and ``paused``."""
    if stats is None:
        return "max_running none, max_per_second none (no jobs, not configured)"
    paused, running, rate = _flow(stats)
    text = f"max_running {_limit_value(running)}, max_per_second {_limit_value(rate)}"
    return text + (", paused" if paused else "")


def _flow(stats: trioqueue.QueueStats | None) -> tuple[bool, int | None, float | None]:
    """A queue's pause and limits (a queue without stats: neither paused nor limited)."""
    if stats is None:
        return False, None, None
    return stats.paused, stats.max_running, stats.max_per_second


def _limit_value(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def flow_text(stats: trioqueue.QueueStats | None) -> str:
    """The ``FLOW`` column of ``status``: ``paused``, ``max 5 running``, ``max 2.5/s``,
    joined by commas; ``-`` for a queue running unpaused and unlimited."""
    paused, running, rate = _flow(stats)
    parts = ["paused"] if paused else []
    if running is not None:
        parts.append(f"max {running} running")
    if rate is not None:
        parts.append(f"max {rate:g}/s")
    return ", ".join(parts) or "-"


# -- status and jobs ----------------------------------------------------------------------


def _add_status(commands: Subparsers) -> None:
    _subcommand(
        commands,
        "status",
        _run_status,
        "count jobs per queue and state, age of the oldest ready; list the worker pools",
    )


def _run_status(args: argparse.Namespace) -> int:
    counts, oldest, pools, flow = run_on_database(args, count_jobs)
    if counts:
        say(*status_table(counts, oldest, flow))
    else:
        say(f"no jobs in schema {schema_of(args)}")
    say("")
    if pools:
        say(*workers_table(pools, datetime.datetime.now(datetime.UTC)))
    else:
        say(f"no worker pools in schema {schema_of(args)}")
    return 0


async def count_jobs(
    dsn: str, schema: str
) -> tuple[
    dict[str, collections.Counter[str]],
    dict[str, float | None],
    list[trioqueue.WorkerInfo],
    dict[str, str],
]:
    """Jobs per queue and state, each queue's oldest ready age and flow control (one
    call: configured queues without jobs are listed too), and the registered worker
    pools (another)."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        stats = await backend.queue_stats()
        pools = await backend.list_workers()
    counts: dict[str, collections.Counter[str]] = {
        queue: collections.Counter(s.counts) for queue, s in stats.items()
    }
    oldest = {queue: s.oldest_ready_age for queue, s in stats.items()}
    return counts, oldest, pools, {queue: flow_text(s) for queue, s in stats.items()}


def workers_table(pools: list[trioqueue.WorkerInfo], now: datetime.datetime) -> list[str]:
    """A row per worker pool: who and where it is, its jobs in flight, how long ago it
    last beat (by this machine's clock), whether it is live or stale, and its clock
    (:func:`clock_text`)."""
    headers = (
        "WORKER", "HOST", "PID", "QUEUE", "CONC", "IN FLIGHT", "LAST BEAT", "STATE", "CLOCK"
    )  # fmt: skip
    rows = [
        [
            pool.worker_id,
            pool.host,
            str(pool.pid),
            pool.queue,
            str(pool.concurrency),
            str(pool.in_flight),
            format_age(max(0.0, (now - pool.last_beat_at).total_seconds())) + " ago",
            STALE if pool.stale else LIVE,
            clock_text(pool.clock_skew, pool.clock_verdict),
        ]
        for pool in pools
    ]
    return format_table(headers, rows)


def clock_text(skew: float | None, verdict: str | None) -> str:
    """A pool's clock as its last beat carried it (docs/protocol.rst §8): ``-`` until
    measured, else its offset from the database's (``+0.012s``: ahead), flagged ``ahead``
    or ``claims stopped`` as the dashboard flags it. A verdict this trioqueue does not know
    (a row another tool wrote) is shown as it is; the table escapes it."""
    if verdict is None:
        return "-"
    offset = "-" if skew is None else f"{skew:+.3f}s"
    flag = CLOCK_FLAGS.get(verdict, verdict)
    return f"{offset} {flag}" if flag else offset


def status_table(
    counts: dict[str, collections.Counter[str]],
    oldest: dict[str, float | None],
    flow: Mapping[str, str] | None = None,
) -> list[str]:
    """A row per queue, a column per state, totals, the oldest ready job's age, and the
    queue's flow control (:func:`flow_text`)."""
    headers = (
        "QUEUE", *(status.upper() for status in JOB_STATUSES), "TOTAL", "OLDEST READY", "FLOW"
    )  # fmt: skip
    flow = flow or {}
    rows = [
        [
            queue,
            *(str(counter[status]) for status in JOB_STATUSES),
            str(counter.total()),
            format_age(oldest.get(queue)),
            flow.get(queue, "-"),
        ]
        for queue, counter in sorted(counts.items())
    ]
    return format_table(headers, rows)


def _add_jobs(commands: Subparsers) -> None:
    jobs = _subcommand(commands, "jobs", _run_jobs, "list jobs, oldest first")
    jobs.add_argument("--queue", help="only this queue")
    jobs.add_argument("--status", choices=JOB_STATUSES, help="only jobs in this state")
    jobs.add_argument("--limit", type=_bounded_int(1, 10_000), default=50, metavar="N")
    jobs.add_argument("--offset", type=_bounded_int(0, 2**63 - 1), default=0, metavar="N")
    jobs.add_argument(
        "--watch",
        action="store_true",
        help="redraw the list in place until Ctrl-C (not a terminal: a snapshot per interval)",
    )
    jobs.add_argument(
        "--interval",
        type=_positive_seconds,
        default=1.0,
        metavar="S",
        help="seconds between refreshes with --watch (default: %(default)s)",
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (math.isfinite(value) and 0.01 <= value <= 3600):
        raise argparse.ArgumentTypeError(f"must be between 0.01 and 3600 seconds, not {text}")
    return value


def _run_jobs(args: argparse.Namespace) -> int:
    if args.watch:
        return _run_jobs_watch(args)
    infos = run_on_database(
        args, list_jobs, args.queue, args.status, args.limit, args.offset, LIST_PREVIEW
    )
    if not infos:
        say("no jobs")
        return 0
    say(*jobs_table(infos))
    return 0


async def list_jobs(
    dsn: str,
    schema: str,
    queue: str | None,
    status: trioqueue.JobStatus | None,
    limit: int,
    offset: int,
    preview: int | None = None,
) -> list[trioqueue.JobInfo]:
    """One page of jobs, as ``list_jobs`` (``preview``: how much of each long text)."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.list_jobs(
            queue=queue, status=status, limit=limit, offset=offset, preview=preview
        )


def _run_jobs_watch(args: argparse.Namespace) -> int:
    """``jobs --watch``: until Ctrl-C, which exits 0 (watching has no other way to end)."""
    try:
        run_on_database(args, watch_jobs, args, sys.stdout)
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        if not _only_interrupts(exc):
            raise
    return 0


async def watch_jobs(dsn: str, schema: str, args: argparse.Namespace, out: TextIO) -> None:
    """The live job list on ``out`` (a terminal), or a snapshot per interval (anything else)."""
    filters = " ".join(
        f"--{name} {value}"
        for name, value in (("queue", args.queue), ("status", args.status), ("limit", args.limit))
        if value is not None
    )
    title = f"trioqueue jobs --watch  schema {schema}  {filters}  every {args.interval:g}s"
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        with contextlib.ExitStack() as stack:
            if out.isatty():
                block = stack.enter_context(LiveBlock(out))
                unicode, colour = supports_unicode(out), wants_colour(out)

                def draw(
                    infos: Sequence[trioqueue.JobInfo],
                    stats: Mapping[str, trioqueue.QueueStats],
                    problem: str | None,
                ) -> None:
                    columns, lines = block.size
                    frame = _watch.watch_frame(
                        infos,
                        stats,
                        title=title,
                        problem=problem,
                        width=columns - 1,
                        height=lines,
                        unicode=unicode,
                        colour=colour,
                    )
                    block.draw(frame)
            else:
                snapshots = 0

                def draw(
                    infos: Sequence[trioqueue.JobInfo],
                    stats: Mapping[str, trioqueue.QueueStats],
                    problem: str | None,
                ) -> None:
                    nonlocal snapshots
                    frame = _watch.watch_frame(
                        infos,
                        stats,
                        title=title,
                        problem=problem,
                        width=10_000,
                        height=10_000,
                    )
                    say(*([""] if snapshots else []), *frame, file=out)
                    snapshots += 1

            async with trio.open_nursery() as nursery:
                await nursery.start(stop_on_signals, nursery.cancel_scope)
                await _watch.watch_loop(
                    backend,
                    draw,
                    queue=args.queue,
                    status=args.status,
                    limit=args.limit,
                    interval=args.interval,
                )


def jobs_table(infos: Sequence[trioqueue.JobInfo]) -> list[str]:
    """Jobs as a table, long cells clipped (and those the read cut marked as cut)."""
    headers = ("ID", "QUEUE", "STATUS", "TRIES", "PRIO", "PROGRESS", "CREATED", "ERROR", "PAYLOAD")
    rows = [
        [
            str(info.id),
            clip(info.queue, 20),
            info.status,
            f"{info.attempts}/{info.max_attempts}",
            str(info.priority),
            "-" if info.progress is None else f"{info.progress:.0%}",
            info.created_at.astimezone().strftime("%Y-%m-%d %H:%M:%S"),
            clip(marked_if_cut(info.last_error or ""), 40),
            clip(_list_payload(info.payload), 40),
        ]
        for info in infos
    ]
    return format_table(headers, rows)


def _list_payload(payload: Any) -> str:
    """A payload in the list: compact JSON, or, cut by the read, its stored text's prefix."""
    if isinstance(payload, trioqueue.TruncatedText):
        return marked_if_cut(payload)
    return json.dumps(payload, separators=(",", ":"))


# -- dashboard (trioqueue/cli/_dashboard.py) ----------------------------------------------


def _add_dashboard(commands: Subparsers) -> None:
    parser = _subcommand(
        commands, "dashboard", _run_dashboard, _dashboard.HELP, _dashboard.DESCRIPTION
    )
    _dashboard.add_arguments(parser)


def _run_dashboard(args: argparse.Namespace) -> int:
    with _errors_as_cli_errors():
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
        )
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        if not _only_interrupts(exc):
            raise
    say("dashboard stopped")
    return 0


# -- demo ---------------------------------------------------------------------------------


def _add_demo(commands: Subparsers) -> None:
    demo = _subcommand(
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
        "--dashboard-port",
        type=_dashboard.port,
        default=_dashboard.DEFAULT_PORT,
        metavar="PORT",
        help="serve the dashboard on 127.0.0.1:PORT while the demo runs, or on a free port "
        "when that one is taken (default: %(default)s)",
    )
    demo.add_argument(
        "--no-dashboard",
        dest="dashboard",
        action="store_false",
        help="do not start the dashboard",
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
    with _errors_as_cli_errors():
        code: int = trio.run(_demo.run_demo, options, sys.stdout)
    return code


# -- argument types -----------------------------------------------------------------------


def _job_id(text: str) -> int:
    """An argparse type: a job id (a whole number)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a job id: {text!r}") from None


def _limit(kind: Callable[[str], float]) -> Callable[[str], float | None]:
    """An argparse type: a number of ``kind``, or ``none`` (no limit). Its range is the
    backend's to check (a clear error, nothing written)."""

    def parse(text: str) -> float | None:
        if text.lower() == "none":
            return None
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number or 'none': {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be finite or 'none', got {text}")
        return value

    return parse


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
