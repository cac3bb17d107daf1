"""``trioqueue jobs``: a page of jobs, oldest first, or (``--watch``) a live view of them.

A page is found by ``--offset`` (the database walks past every row before it) or, however
deep, by ``--after CURSOR`` (keyset paging: ``list_jobs(after=)``, docs/api.rst, "Paging
through jobs"); a full page ends with the cursor of its last job, the ``--after`` of the
next page.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import trio

import trioqueue
from trioqueue.cli import _watch
from trioqueue.cli._commands.common import (
    JOB_STATUSES,
    CliError,
    Subparsers,
    add_read_dsn_option,
    bounded_int,
    only_interrupts,
    read_replica,
    resolve_read_dsn,
    run_on_database,
    subcommand,
)
from trioqueue.cli._commands.filters import add_cancelled
from trioqueue.cli._escape import say
from trioqueue.cli._terminal import (
    LiveBlock,
    clip,
    format_age,
    format_table,
    marked_if_cut,
    stop_on_signals,
    supports_unicode,
    wants_colour,
)

#: How many characters of each payload, result and error ``jobs`` reads (``list_jobs``'
#: ``preview``): its columns show 40; ``show ID`` reads the whole job.
LIST_PREVIEW = 200


def add(commands: Subparsers) -> None:
    jobs = subcommand(commands, "jobs", _run_jobs, "list jobs, oldest first")
    add_read_dsn_option(jobs)
    jobs.add_argument("--queue", help="only this queue")
    jobs.add_argument("--status", choices=JOB_STATUSES, help="only jobs in this state")
    add_cancelled(jobs)
    jobs.add_argument("--limit", type=bounded_int(1, 10_000), default=50, metavar="N")
    jobs.add_argument("--offset", type=bounded_int(0, 2**63 - 1), default=0, metavar="N")
    jobs.add_argument(
        "--after",
        metavar="CURSOR",
        help="the page after this cursor (a full page ends with the next one's)",
    )
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
        if args.cancelled is not None:
            raise CliError("--watch shows every job: not with --no-cancelled or --cancelled-only")
        if args.after is not None:
            raise CliError("--watch shows the first page: not with --after")
        return _run_jobs_watch(args)
    if args.after is not None and args.offset:
        raise CliError("give --offset or --after, not both")
    infos = run_on_database(
        args,
        list_jobs,
        args.queue,
        args.status,
        args.limit,
        args.offset,
        LIST_PREVIEW,
        args.cancelled,
        resolve_read_dsn(args),
        args.after,
    )
    if not infos:
        say("no jobs")
        return 0
    say(*jobs_table(infos))
    if len(infos) == args.limit:
        say("", f"next page: --after {trioqueue.job_cursor(infos[-1], 'id')}")
    return 0


async def list_jobs(
    dsn: str,
    schema: str,
    queue: str | None,
    status: trioqueue.JobStatus | None,
    limit: int,
    offset: int,
    preview: int | None = None,
    cancelled: bool | None = None,
    read_dsn: str | None = None,
    after: str | None = None,
) -> list[trioqueue.JobInfo]:
    """One page of jobs, as ``list_jobs`` (``preview``: how much of each long text;
    ``cancelled``: cancellations kept, left out or alone; ``read_dsn``: a replica to read;
    ``after``: the cursor the page starts after, in id order)."""
    async with trioqueue.open_postgres(
        dsn, schema=schema, max_connections=1, **read_replica(read_dsn)
    ) as backend:
        return await backend.list_jobs(
            queue=queue,
            status=status,
            limit=limit,
            offset=offset,
            preview=preview,
            cancelled=cancelled,
            after=after,
        )


def _run_jobs_watch(args: argparse.Namespace) -> int:
    """``jobs --watch``: until Ctrl-C, which exits 0 (watching has no other way to end)."""
    try:
        run_on_database(args, watch_jobs, args, sys.stdout)
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        if not only_interrupts(exc):
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
    replica = read_replica(resolve_read_dsn(args))
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1, **replica) as backend:
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
                        infos, stats, title=title, problem=problem, width=10_000, height=10_000
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
    """Jobs as a table, long cells clipped (and those the read cut marked as cut), with
    when each finished and how long it took from its enqueue."""
    headers = (
        "ID", "QUEUE", "STATUS", "TRIES", "PRIO", "PROGRESS", "CREATED", "FINISHED", "TOOK",
        "ERROR", "PAYLOAD",
    )  # fmt: skip
    rows = [
        [
            str(info.id),
            clip(info.queue, 20),
            info.status,
            f"{info.attempts}/{info.max_attempts}",
            str(info.priority),
            "-" if info.progress is None else f"{info.progress:.0%}",
            _local(info.created_at),
            "-" if info.finished_at is None else _local(info.finished_at),
            _took(info),
            clip(marked_if_cut(info.last_error or ""), 40),
            clip(_list_payload(info.payload), 40),
        ]
        for info in infos
    ]
    return format_table(headers, rows)


def _local(at: datetime.datetime) -> str:
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _took(info: trioqueue.JobInfo) -> str:
    """From enqueued to finished (every attempt and wait), as the dashboard's list has it;
    ``-`` for a job not finished."""
    if info.finished_at is None:
        return "-"
    return format_age(max(0.0, (info.finished_at - info.created_at).total_seconds()))


def _list_payload(payload: Any) -> str:
    """A payload in the list: compact JSON, or, cut by the read, its stored text's prefix."""
    if isinstance(payload, trioqueue.TruncatedText):
        return marked_if_cut(payload)
    return json.dumps(payload, separators=(",", ":"))
