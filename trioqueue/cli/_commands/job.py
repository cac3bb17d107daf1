"""The commands that act on one job by its id: ``cancel``, ``retry`` and ``delete``
(``show`` reads one: show.py)."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import trioqueue
from trioqueue.cli._commands.common import (
    EXIT_FAILED,
    CliError,
    Subparsers,
    job_id_type,
    run_on_database,
    subcommand,
)
from trioqueue.cli._commands.matching import Operation, add_matching, given_filters, run_matching
from trioqueue.cli._escape import say, visible
from trioqueue.cli._words import job_is


def add(commands: Subparsers) -> None:
    """``cancel ID``, ``retry ID`` and ``delete ID``, in that order."""
    _add_cancel(commands)
    _add_job_commands(commands)


def _add_cancel(commands: Subparsers) -> None:
    cancel = subcommand(
        commands,
        "cancel",
        _run_cancel,
        "cancel a job: at once if it waits, via its worker if it runs",
    )
    cancel.add_argument("job_id", metavar="ID", type=job_id_type)


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
    """``retry ID`` and ``delete ID``: one operation on one job, refused by some states;
    or ``--all-matching`` filters: on every job they match (matching.py)."""
    operations: tuple[tuple[Operation, JobOperation, str, str, str], ...] = (
        ("retry", trioqueue.PostgresBackend.retry, "back on its queue",
         "only a failed job can be retried",
         "put a failed job back on its queue for another attempt"),
        ("delete", trioqueue.PostgresBackend.delete_job, "deleted",
         "a running job cannot be deleted (cancel it first)",
         "delete a job that is not running (cancel it first)"),
    )  # fmt: skip
    for name, operation, done, refused, about in operations:
        run = functools.partial(
            _on_job_or_matching, name=name, operation=operation, done=done, refused=refused
        )
        command = subcommand(commands, name, run, about)
        command.add_argument("job_id", metavar="ID", type=job_id_type, nargs="?")
        add_matching(command, name)


def _on_job_or_matching(args: argparse.Namespace, *, name: Operation, **one: Any) -> int:
    """``retry ID`` or ``retry --all-matching ...`` (and ``delete``'s)."""
    given_filters(args)
    if args.job_id is None:
        return run_matching(args, name)
    return _on_job(args, **one)


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
