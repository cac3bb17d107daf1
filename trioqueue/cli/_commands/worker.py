"""``trioqueue worker``: run worker pools until a signal, then shut them down gracefully.

The options become WorkerConfig fields (:func:`worker_options`), checked all at once before
connecting (:func:`worker_configs`); :func:`supervise_worker` turns the first signal into a
graceful shutdown and the second into an immediate one; :func:`serve_worker` opens the
backend, and the metrics server when asked, and runs the pools on it.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeAlias

import trio

import trioqueue
from trioqueue._runtime.config import problems_of
from trioqueue.cli._commands import worker_databases
from trioqueue.cli._commands.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    LISTEN_DSN_ENV,
    LOG_FORMATS,
    CliError,
    Subparsers,
    run_on_database,
    subcommand,
)
from trioqueue.cli._commands.worker_imports import (
    ReportedResources,
    import_handler,
    import_object,
    pool_specs,
)
from trioqueue.cli._health import StartedTo, WorkerHealth, watching
from trioqueue.cli._install import install_hint
from trioqueue.cli._terminal import check_migrated
from trioqueue.cli._worker_defaults import CONCURRENCY_HELP, default_concurrency, default_help
from trioqueue.cli._worker_lines import JsonLines, WorkerOut, say_line


def add(commands: Subparsers) -> None:
    worker = subcommand(
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
        ("--maintenance-interval", "maintenance_interval", _schedule_interval,
         "as the elected maintainer, prune finished jobs past their retention this often, "
         "or off: no part in maintenance (docs/howto/retention.rst)"),
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
        "--max-snoozes",
        type=int,
        metavar="N",
        help=default_help(
            "max_snoozes",
            "fail a job for good when it snoozes again after N snoozes (docs/protocol.rst §17)",
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
        "--batch-handler",
        dest="batch_handler",
        action="store_true",
        help="the handlers named are batch handlers, async def handler(jobs, ctx): each "
        "claimed batch in one call, answering one outcome per job (default: off; "
        "docs/howto/batch-handler.rst)",
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
        help="serve Prometheus metrics on http://HOST:N/metrics, and the health checks "
        "/livez and /readyz (needs the metrics extra; default: none)",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address --metrics-port binds, 0.0.0.0 for any (default: %(default)s)",
    )
    worker.add_argument(
        "--liveness-file",
        type=Path,
        metavar="PATH",
        help="touch PATH every few seconds while the process is live, for probes that "
        "cannot use HTTP (docs/howto/deploy.rst; default: none)",
    )
    worker.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="the library's log records on stderr: lines of text, or one JSON object per "
        "line, the worker's own lines and its error among them (default: %(default)s)",
    )
    worker_databases.add_arguments(worker)


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
    "maintenance_interval",
    "quarantine_after",
    "max_snoozes",
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

#: One config, or several (one pool each).
Configs: TypeAlias = "trioqueue.WorkerConfig | Sequence[trioqueue.WorkerConfig]"


def _run_worker(args: argparse.Namespace) -> int:
    placed = worker_databases.take_placements(args)  # before the --queue options are read
    configs = worker_configs(args)
    resources = None if args.resources is None else ReportedResources(args.resources)
    listen_dsn = args.listen_dsn or os.environ.get(LISTEN_DSN_ENV) or None
    groups = worker_databases.database_groups(args, configs, placed, listen_dsn)
    metrics = None
    if args.metrics_port is not None:
        if importlib.util.find_spec("prometheus_client") is None:
            raise CliError(f"--metrics-port needs prometheus-client; {install_hint('metrics')}")
        metrics = (args.metrics_host, args.metrics_port)
    work = functools.partial(run_worker, listen_dsn=listen_dsn, metrics=metrics)
    # Only when given: stand-ins of serve_worker need not know them.
    if resources is not None:
        work = functools.partial(work, resources=resources)
    if args.liveness_file is not None:
        work = functools.partial(work, liveness_file=args.liveness_file)
    # One pool goes as its config alone, as before several could run (serve_worker takes
    # either).
    pools: Configs = configs[0] if len(configs) == 1 else configs
    out: WorkerOut = JsonLines(sys.stderr) if args.log_format == "json" else sys.stdout
    if groups is not None:
        return _run_on_databases(args, groups, out, work.keywords)
    stopped_at_once = run_on_database(args, work, pools, out)
    return EXIT_INTERRUPTED if stopped_at_once else 0


def _run_on_databases(
    args: argparse.Namespace,
    groups: list[worker_databases.Group],
    out: WorkerOut,
    options: dict[str, Any],
) -> int:
    """The worker over several databases (``worker_groups.py``, imported here: it builds on
    this module's serving). ``options``: ``run_worker``'s, but the LISTEN DSN, which the
    default database's group holds."""
    from trioqueue.cli._commands.worker_groups import run_groups

    options = {name: value for name, value in options.items() if name != "listen_dsn"}
    stopped_at_once = run_groups(args, groups, out, **options)
    return EXIT_INTERRUPTED if stopped_at_once else 0


def worker_configs(args: argparse.Namespace) -> list[trioqueue.WorkerConfig]:
    """The pools ``worker`` runs, one config per queue, checked before connecting.

    Raises:
        CliError: nothing to work on, a queue given twice, a handler, hook or mapping that
            does not import or is of the wrong kind, or every problem of the configs.
    """
    specs = pool_specs(args.handler, args.queue)
    options = worker_options(args)
    # --batch-handler: every handler named is a batch handler (docs/protocol.rst §20).
    field = "batch_handler" if args.batch_handler else "handler"
    configs = [
        spec if isinstance(spec, trioqueue.WorkerConfig)
        else trioqueue.WorkerConfig(
            queue=queue, **({field: spec, "concurrency": default_concurrency(spec), **options})
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


def worker_options(args: argparse.Namespace) -> dict[str, Any]:
    """The WorkerConfig fields the options give (every pool built from a handler)."""
    given = {name: getattr(args, name) for name in WORKER_OPTIONS}
    options = {name: value for name, value in given.items() if value is not None}
    for name in ("schedule_interval", "maintenance_interval"):
        if options.get(name) == OFF:
            options[name] = None  # given as "off", not left out
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


async def run_worker(
    dsn: str,
    schema: str,
    configs: Configs,
    out: WorkerOut,
    *,
    listen_dsn: str | None = None,
    metrics: tuple[str, int] | None = None,
    resources: Any = None,
    liveness_file: Path | None = None,
) -> bool:
    """Run the pools until SIGINT or SIGTERM, then shut them down gracefully (see
    :func:`supervise_worker`); True when a second signal stopped them at once."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        serve = functools.partial(
            serve_worker, dsn, schema, listen_dsn=listen_dsn, metrics=metrics, out=out
        )
        if resources is not None:
            serve = functools.partial(serve, resources=resources)
        if liveness_file is not None:
            serve = functools.partial(serve, liveness_file=liveness_file)
        return await supervise_worker(serve, configs, signals, out, where=f"schema {schema}")


#: Runs the pools until cancelled: ``await serve(configs, stop_now=event, task_status=status)``.
PoolServer = Callable[..., Awaitable[None]]


async def supervise_worker(
    serve: PoolServer, configs: Configs, signals: AsyncIterator[int], out: WorkerOut, *, where: str
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
    liveness_file: Path | None = None,
    stop_now: trio.Event | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Open the backend and run a pool per config on it (``trioqueue.run_workers``) until
    cancelled (graceful shutdown; ``stop_now`` ends the grace at once, see
    ``run_worker_pool``). ``listen_dsn``: where to LISTEN when ``dsn`` is a transaction
    pooler (docs/pgbouncer.rst). ``metrics``: the ``(host, port)`` to serve ``/metrics`` on
    while the pools run (docs/metrics.rst), and the health checks ``/livez`` and
    ``/readyz``; its address is written to ``out``. ``liveness_file``: a file touched while
    the process is live (trioqueue/cli/_health.py). ``resources``: the async context
    manager (or factory) whose value handlers get as ``ctx.resources``, entered once the
    backend is open and exited before it closes."""
    every = _config_list(configs)
    async with trioqueue.open_postgres(
        dsn, schema=schema, max_connections=worker_connections(every), listen_dsn=listen_dsn
    ) as backend:
        await check_migrated(backend)
        health = None
        if metrics is not None or liveness_file is not None:
            health = WorkerHealth([config.queue for config in every])
            task_status = StartedTo(health, task_status)  # started: every pool is claiming
        async with AsyncExitStack() as stack:
            if health is not None:
                await stack.enter_async_context(watching(health, backend, liveness_file))
            observer = None
            if metrics is not None:
                observer = await _serve_metrics(stack, backend, metrics, out, health)
            await trioqueue.run_workers(
                backend,
                every,
                resources=resources,
                stop_now=stop_now,
                observer=observer,
                task_status=task_status,
            )


async def _serve_metrics(
    stack: AsyncExitStack,
    backend: trioqueue.PostgresBackend,
    metrics: tuple[str, int],
    out: WorkerOut | None,
    health: WorkerHealth | None,
) -> trioqueue.PoolObserver:
    """Serve ``/metrics`` (and the health checks) until ``stack`` closes; the observer the
    pools report to."""
    from trioqueue.metrics import serve_metrics  # the metrics extra: imported when asked

    host, port = metrics
    routes = {} if health is None else {"/livez": health.livez, "/readyz": health.readyz}
    try:
        served = await stack.enter_async_context(
            serve_metrics(backend, host=host, port=port, routes=routes)
        )
    except OSError as exc:  # in use, or not an address of this machine
        where = f"{_url_host(host)}:{port}"
        raise CliError(f"cannot serve metrics on {where}: {exc}", EXIT_FAILED) from exc
    if out is not None:
        where = f"{_url_host(served.host)}:{served.port}"
        say_line(out, f"metrics on http://{where}/metrics", "metrics_serving")
    return served.observer


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


#: ``--schedule-interval off``, ``--maintenance-interval off``: the pools take no part in
#: scheduling, in maintenance; ``--quarantine-after off``: ``quarantine_after=None``.
OFF = "off"

#: The argparse types of the pool options that take a word beside their number.
_heartbeat = _number_or("auto", float, "a number")
_schedule_interval = _number_or(OFF, float, "a number")
_quarantine_after = _number_or(OFF, int, "a whole number")
