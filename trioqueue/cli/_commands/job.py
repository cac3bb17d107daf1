"""The commands on one job by its id: ``cancel``, ``retry``, ``delete`` and ``show``."""

from __future__ import annotations

import argparse
import functools
import json
import math
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
from trioqueue.cli._escape import say, visible, visible_lines
from trioqueue.cli._words import job_is


def add(commands: Subparsers) -> None:
    """``cancel ID``, ``retry ID``, ``delete ID`` and ``show ID``, in that order."""
    _add_cancel(commands)
    _add_job_commands(commands)
    _add_show(commands)


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
        command = subcommand(commands, name, run, about)
        command.add_argument("job_id", metavar="ID", type=job_id_type)


def _add_show(commands: Subparsers) -> None:
    """``show ID [--wait [--timeout S]]``: one job, with its result (docs/flow.rst)."""
    show = subcommand(
        commands, "show", _run_show, "show one job: its state, error, group and result"
    )
    show.add_argument("job_id", metavar="ID", type=job_id_type)
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
