"""``trioqueue worker`` over several databases: a backend per database, every pool of the
process run by one ``trioqueue.run_workers({backend: configs})`` (docs/howto/beyond-one-server.rst).

The nursery tree is the one-database worker's (``worker.py``), with one backend opened per
database before anything starts (each checked as migrated, an error naming its database), and
the health checks and the metrics' gauges reading them all (``trioqueue/cli/_several.py``).
One signal shuts every pool down; a database that stops answering meanwhile costs only the
pools that run on it, which retry their claims until it is back.
"""

from __future__ import annotations

import argparse
import functools
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import trio

import trioqueue
from trioqueue.cli._commands.common import errors_as_cli_errors, stderr_log_handler
from trioqueue.cli._commands.worker import (
    _serve_metrics,
    supervise_worker,
    worker_connections,
)
from trioqueue.cli._commands.worker_databases import Group
from trioqueue.cli._health import StartedTo, WorkerHealth, watching
from trioqueue.cli._several import SeveralBackends
from trioqueue.cli._terminal import check_migrated, library_logs_to
from trioqueue.cli._worker_lines import WorkerOut, log_level, say_line

__all__ = ["run_groups", "serve_groups"]


def run_groups(
    args: argparse.Namespace, groups: Sequence[Group], out: WorkerOut, **options: Any
) -> bool:
    """``trio.run`` the worker on ``groups``, with database and input errors as CliError;
    True when a second signal stopped it at once. ``options``: those of :func:`serve_groups`."""
    with (
        library_logs_to(stderr_log_handler(args.log_format), level=log_level(args)),
        errors_as_cli_errors(),
    ):
        return trio.run(functools.partial(run_worker_groups, groups, out, **options))


async def run_worker_groups(groups: Sequence[Group], out: WorkerOut, **options: Any) -> bool:
    """Serve the pools of every group until SIGINT or SIGTERM (``supervise_worker``)."""
    configs = [config for group in groups for config in group.configs]

    async def serve(_: object, **supervised: Any) -> None:
        # supervise_worker hands the configs back; the groups already hold them.
        await serve_groups(groups, out=out, **options, **supervised)

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        one = f"database {groups[0].database.name}"
        where = f"{len(groups)} databases" if len(groups) > 1 else one
        return await supervise_worker(serve, configs, signals, out, where=where)


async def serve_groups(
    groups: Sequence[Group],
    *,
    out: WorkerOut | None = None,
    metrics: tuple[str, int] | None = None,
    resources: Any = None,
    liveness_file: Path | None = None,
    stop_now: trio.Event | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Open a backend per group and run its pools on it, every pool in one
    ``trioqueue.run_workers``, until cancelled; as ``serve_worker`` does for one database."""
    async with AsyncExitStack() as stack:
        backends = {}
        for group in groups:
            backend = await stack.enter_async_context(_opened(group))
            backends[backend] = list(group.configs)
            if out is not None:
                for config in group.configs:
                    say_line(
                        out,
                        f"queue {config.queue!r} on database {group.database.name} "
                        f"({group.database.shown})",
                        "queue_database",
                    )
        several = SeveralBackends({b: [c.queue for c in cs] for b, cs in backends.items()})
        health = None
        every = [config.queue for configs in backends.values() for config in configs]
        if metrics is not None or liveness_file is not None:
            health = WorkerHealth(every)
            task_status = StartedTo(health, task_status)
            await stack.enter_async_context(watching(health, several, liveness_file))
        observer = None
        if metrics is not None:
            # The metrics read only statistics() and queue_stats(), which SeveralBackends
            # answers for every database (typed for one backend, read by duck typing).
            observer = await _serve_metrics(stack, several, metrics, out, health)  # type: ignore[arg-type]
        await trioqueue.run_workers(
            backends,
            resources=resources,
            stop_now=stop_now,
            observer=observer,
            task_status=task_status,
        )


@asynccontextmanager
async def _opened(group: Group) -> AsyncIterator[trioqueue.PostgresBackend]:
    """The group's backend, open and checked as migrated; an error of either names the
    database (``BackendError`` messages show a DSN with its password masked)."""
    database = group.database
    async with AsyncExitStack() as stack:
        try:
            backend = await stack.enter_async_context(
                trioqueue.open_postgres(
                    database.dsn,
                    schema=database.schema,
                    max_connections=worker_connections(group.configs),
                    listen_dsn=database.listen_dsn,
                )
            )
            await check_migrated(backend)
        except trioqueue.BackendError as exc:
            # Only opening: the pools' own errors name their queue, not this database.
            raise _naming(exc, database.name) from exc
        yield backend


def _naming(exc: trioqueue.BackendError, name: str) -> trioqueue.BackendError:
    return trioqueue.BackendError(
        f"database {name!r}: {exc}", transient=exc.transient, hint=exc.hint
    )
