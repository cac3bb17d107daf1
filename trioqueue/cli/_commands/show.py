"""``trioqueue show ID``: one job, its details, its attempts as a timeline, and its last
failure's traceback (docs/cli.rst, ``show``). Every stored string is shown escaped
(trioqueue/cli/_escape.py): a field's further lines are indented past the field names, so
that none can pass for a field."""

from __future__ import annotations

import argparse
import datetime
import json
import math
from collections.abc import Sequence
from typing import Any

import trioqueue
from trioqueue.cli._commands.common import (
    EXIT_FAILED,
    CliError,
    Subparsers,
    add_read_dsn_option,
    job_id_type,
    read_replica,
    resolve_read_dsn,
    run_on_database,
    subcommand,
)
from trioqueue.cli._escape import say, visible, visible_lines

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


def add(commands: Subparsers) -> None:
    """``show ID [--wait [--timeout S]]``: one job, with its result (docs/flow.rst)."""
    show = subcommand(
        commands, "show", _run_show, "show one job: its state, error, group, result and attempts"
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
    show.add_argument(
        "--tree",
        action="store_true",
        help="also list the job's parent, children, dependencies and dependents, with their states",
    )
    add_read_dsn_option(show)  # the job and its attempts; --wait waits on --dsn


def _run_show(args: argparse.Namespace) -> int:
    if args.timeout is not None and not (
        args.wait and math.isfinite(args.timeout) and args.timeout >= 0
    ):
        raise CliError("--timeout needs --wait, and a finite number of seconds >= 0")
    info, timed_out, attempts = run_on_database(
        args, show_job, args.job_id, args.wait, args.timeout, resolve_read_dsn(args)
    )
    if info is None:
        raise CliError(f"no job with id {args.job_id}", EXIT_FAILED)
    say(*job_report(info, attempts))
    if args.tree:
        say(*tree_lines(run_on_database(args, show_tree, args.job_id)))
    if timed_out:
        raise CliError(
            f"job {args.job_id} is still {info.status} after {args.timeout:g} s", EXIT_FAILED
        )
    return 0


async def show_job(
    dsn: str,
    schema: str,
    job_id: int,
    wait: bool,
    seconds: float | None,
    read_dsn: str | None = None,
) -> tuple[trioqueue.JobInfo | None, bool, list[trioqueue.AttemptInfo]]:
    """:func:`read_job` on the database at ``dsn`` (its replica at ``read_dsn``, if given)."""
    async with trioqueue.open_postgres(
        dsn, schema=schema, max_connections=2, **read_replica(read_dsn)
    ) as backend:
        return await read_job(backend, job_id, wait, seconds)


async def read_job(
    backend: Backend, job_id: int, wait: bool, seconds: float | None
) -> tuple[trioqueue.JobInfo | None, bool, list[trioqueue.AttemptInfo]]:
    """The job (None: unknown), after waiting for it to finish if asked; whether the wait
    timed out (then the job as it is now); and its attempts, oldest first."""
    try:
        if wait:
            try:
                info, timed_out = await backend.wait_for(job_id, timeout=seconds), False
            except TimeoutError:
                info, timed_out = await backend.get_job(job_id), True
        else:
            info, timed_out = await backend.get_job(job_id), False
        attempts: list[trioqueue.AttemptInfo] = list(await backend.list_attempts(job_id))
    except trioqueue.UnknownJobError:  # none, or deleted between the reads
        return None, False, []
    return info, timed_out, attempts


async def show_tree(dsn: str, schema: str, job_id: int) -> trioqueue.JobDependencies:
    """The job's dependency edges, read on the primary (docs/protocol.rst §21)."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.dependencies(job_id)


def tree_lines(tree: trioqueue.JobDependencies) -> list[str]:
    """``show --tree``'s lines: its parent, its children, the jobs this one runs after and
    those that run after it, one per line with its queue and state, made visible (a queue
    name is stored text)."""
    lines = []
    parent = () if tree.parent is None else (tree.parent,)
    for title, ends in (
        ("parent", parent),
        ("children", tree.children),
        ("depends on", tree.dependencies),
        ("dependents", tree.dependents),
    ):
        lines.append(f"  {title}" + ("" if ends else "  (none)"))
        lines += [" " * 4 + visible(f"job {d.id} in queue {d.queue}: {d.status}") for d in ends]
    return lines


def job_report(
    info: trioqueue.JobInfo, attempts: Sequence[trioqueue.AttemptInfo] = ()
) -> list[str]:
    """``show``'s lines: a headline, one ``name  value`` line per detail it has, then a
    line per attempt (:func:`attempt_lines`) and the last failure's traceback."""
    cancelled = " (cancelled)" if info.cancelled else ""
    head = visible(
        f"job {info.id} in queue {info.queue}: {info.status}{cancelled} "
        f"(attempt {info.attempts} of {info.max_attempts})"
    )
    details: list[tuple[str, object]] = [
        ("payload", _json_text(info.payload)),
        ("priority", info.priority),
        ("group", info.group),
        ("created", info.created_at),
        ("next", info.next_attempt_at and f"attempt at {info.next_attempt_at}"),
        (
            "waiting",
            "for jobs " + ", ".join(map(str, info.waiting_on)) if info.waiting_on else None,
        ),
        ("finished", info.finished_at),
        ("pool", info.finished_by),
        # Snoozes (docs/protocol.rst §17), across attempts; said only once there was one.
        ("snoozes", info.snoozes or None),
        ("progress", info.progress),
        ("worker", info.worker_id),
        ("cancel", info.cancel_requested_at and f"requested at {info.cancel_requested_at}"),
        ("error", _error_text(info)),
        ("result", None if info.status != "succeeded" else _json_text(info.result)),
        (
            "checkpoint",
            info.checkpointed_at
            and f"{_json_text(info.checkpoint)} (stored at {info.checkpointed_at})",
        ),
    ]
    lines = [head]
    for name, value in details:
        if value is not None:
            lines += _field_lines(name, str(value))
    if attempts:
        lines += ["  attempts", *(line for a in attempts for line in attempt_lines(a))]
    failures = [a for a in attempts if a.traceback]
    if failures:
        last = failures[-1]
        lines += _field_lines("traceback", f"of attempt {last.attempt}\n{last.traceback}")
    return lines


def _error_text(info: trioqueue.JobInfo) -> str | None:
    """The job's last error; a succeeded job keeps an earlier attempt's, labelled so."""
    if info.last_error is None or info.status != "succeeded":
        return info.last_error
    return f"(of an earlier attempt) {info.last_error}"


def attempt_lines(attempt: trioqueue.AttemptInfo) -> list[str]:
    """One attempt as a timeline: its number, outcome and moments (claimed, then the
    handler's start and the outcome, as offsets), its wait and run time, the pool and
    host; its error on a line below. Made visible, and indented past the field names."""
    claimed = attempt.claimed_at
    moments = [f"claimed {claimed.astimezone().strftime('%Y-%m-%d %H:%M:%S')}"]
    if attempt.started_at is not None:
        moments.append(f"started +{_seconds(attempt.started_at - claimed)}")
    moments.append(f"finished +{_seconds(attempt.finished_at - claimed)}")
    if attempt.wait_seconds is not None:
        moments.append(f"waited {attempt.wait_seconds:.3f}s")
    if attempt.run_seconds is not None:
        moments.append(f"ran {attempt.run_seconds:.3f}s")
    where = " on ".join(part for part in (attempt.worker_id, attempt.host) if part)
    head = f"#{attempt.attempt} {attempt.outcome:<9} {', '.join(moments)}"
    lines = [" " * 4 + visible(head + (f" by {where}" if where else ""))]
    if attempt.error:  # below, deeper: no line of it reads as an attempt of its own
        lines += [" " * 7 + line for line in visible_lines(attempt.error)]
    return lines


def _seconds(delta: datetime.timedelta) -> str:
    return f"{delta.total_seconds():.3f}s"


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
