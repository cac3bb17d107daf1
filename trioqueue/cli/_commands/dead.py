"""``trioqueue dead``: the dead letters, the jobs that failed for good (docs/protocol.rst
§19), with their count and breakdown per queue and per error type; and ``trioqueue dead
redrive``, which puts the ones the filters match back on their queues.

The count and the breakdown are those of the newest ``--sample`` dead letters that match
(``dead_letter_summary``), so on a table of millions the command reads a bounded number of
rows; more than that shows as ``10000+``. The list pages by id: each page ends with the
``--after`` that shows the next one.

A redrive is confirmed first, as ``retry --all-matching`` is (matching.py): without
``--yes`` it counts every match exactly and exits 1 saying how many; with ``--yes`` it
redrives them in bounded batches (``retry_matching`` with the dead-letter filters) and says
how many it did (a job may change meanwhile: the act's own count is the one printed).
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Sequence
from typing import Any

import trioqueue
from trioqueue.cli._commands.common import (
    Subparsers,
    add_read_dsn_option,
    bounded_int,
    common_options,
    read_replica,
    resolve_read_dsn,
    run_on_database,
    subcommand,
)
from trioqueue.cli._commands.filters import add_cancelled
from trioqueue.cli._commands.matching import unconfirmed
from trioqueue.cli._durations import parse_duration
from trioqueue.cli._escape import say
from trioqueue.cli._terminal import clip, format_table

#: The filters' option names, as the backend's keyword arguments name them.
FILTERS = ("queue", "error", "error_type", "failed_since", "failed_before", "cancelled")
#: ``--error-type -``: no error type recorded (the backend's ``""``), as the tables show it.
NO_ERROR_TYPE = "-"
#: How many of the newest matches the count and breakdown read unless told.
DEFAULT_SAMPLE = 10_000


def add(commands: Subparsers) -> None:
    dead = subcommand(
        commands,
        "dead",
        _run_dead,
        "list the dead letters (jobs that failed for good), counted per queue and error type",
    )
    add_read_dsn_option(dead)
    add_dead_filters(dead)
    dead.add_argument("--limit", type=bounded_int(1, 10_000), default=50, metavar="N")
    dead.add_argument(
        "--after",
        type=bounded_int(1, 2**63 - 1),
        metavar="ID",
        help="the page after this id (the line under each page names it)",
    )
    dead.add_argument(
        "--sample",
        type=bounded_int(1, 10_000_000),
        default=DEFAULT_SAMPLE,
        metavar="N",
        help="count among the newest N matches (default: %(default)s)",
    )
    actions = dead.add_subparsers(title="actions", dest="action", metavar="ACTION")
    redrive = actions.add_parser(
        "redrive",
        parents=[common_options()],
        help="put the dead letters the filters match back on their queues, in batches",
        description="put the dead letters the filters match back on their queues, in batches",
    )
    add_dead_filters(redrive)
    redrive.add_argument(
        "--batch-size",
        type=bounded_int(1, 10_000),
        default=500,
        metavar="N",
        help="jobs per statement (default: %(default)s)",
    )
    redrive.add_argument(
        "--yes", action="store_true", help="do it (without: count the matches, exit 1)"
    )


def add_dead_filters(parser: argparse.ArgumentParser) -> None:
    """The dead-letter filters: queue, error text, error type, a time range, and the
    cancellations kept alone or left out."""
    parser.add_argument("--queue", help="only this queue")
    parser.add_argument(
        "--error", metavar="TEXT", help="only jobs whose last error holds TEXT (any case)"
    )
    parser.add_argument(
        "--error-type",
        type=error_type,
        metavar="TYPE",
        help="only jobs whose last attempt raised TYPE (KeyError, myapp.errors.Refused); "
        f"{NO_ERROR_TYPE}: those with none recorded",
    )
    parser.add_argument(
        "--since",
        dest="failed_since",
        type=moment,
        metavar="WHEN",
        help="only jobs that failed at or after WHEN: an ISO time (local unless it says) "
        "or a duration ago (90m, 2d)",
    )
    parser.add_argument(
        "--before",
        dest="failed_before",
        type=moment,
        metavar="WHEN",
        help="only jobs that failed before WHEN (as --since)",
    )
    add_cancelled(parser)


def error_type(text: str) -> str:
    """An argparse type: an error type, exactly; ``-`` (or nothing): none recorded."""
    return "" if text == NO_ERROR_TYPE else text


def moment(text: str) -> datetime.datetime:
    """An argparse type: an ISO 8601 time (without an offset: this machine's local time),
    or a duration before now (``2h``: two hours ago)."""
    return moment_at(text, datetime.datetime.now(datetime.UTC))


def moment_at(text: str, now: datetime.datetime) -> datetime.datetime:
    """:func:`moment`, a duration counted back from ``now``."""
    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = None
    else:
        if seconds is not None:
            return now - datetime.timedelta(seconds=seconds)
    try:
        at = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (an ISO time, 2026-11-30T08:00, or a duration ago, 2h)"
        ) from None
    return at if at.utcoffset() is not None else at.astimezone()


def filters_of(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in FILTERS if getattr(args, name) is not None}


def filters_text(filters: dict[str, Any]) -> str:
    """The filters as options, for a message (``every dead letter`` for none)."""
    words = []
    for name, value in filters.items():
        if name == "cancelled":
            words.append("--cancelled-only" if value else "--no-cancelled")
        elif isinstance(value, datetime.datetime):
            option = "--since" if name == "failed_since" else "--before"
            words.append(f"{option} {value.isoformat(timespec='seconds')}")
        elif name == "error_type":
            words.append(f"--error-type {value or NO_ERROR_TYPE}")
        else:
            words.append(f"--{name.replace('_', '-')} {value}")
    return " ".join(words) or "every dead letter"


def _run_dead(args: argparse.Namespace) -> int:
    if args.action == "redrive":
        return _run_redrive(args)
    filters = filters_of(args)
    summary, page = run_on_database(
        args, read_dead, filters, args.sample, args.limit, args.after, resolve_read_dsn(args)
    )
    say(*dead_report(summary, page, filters, args.limit))
    return 0


async def read_dead(
    dsn: str,
    schema: str,
    filters: dict[str, Any],
    sample: int,
    limit: int,
    after: int | None,
    read_dsn: str | None = None,
) -> tuple[trioqueue.DeadLetterSummary, list[trioqueue.DeadLetter]]:
    """The summary and one page of the dead letters ``filters`` match."""
    async with trioqueue.open_postgres(
        dsn, schema=schema, max_connections=1, **read_replica(read_dsn)
    ) as backend:
        summary = await backend.dead_letter_summary(**filters, sample=sample)
        page = await backend.list_dead_letters(**filters, limit=limit, after=after)
    return summary, page


def dead_report(
    summary: trioqueue.DeadLetterSummary,
    page: Sequence[trioqueue.DeadLetter],
    filters: dict[str, Any],
    limit: int,
) -> list[str]:
    """The count, the breakdowns, the page and the way to the next one."""
    if not summary.total:
        return [f"no dead letters match {filters_text(filters)}"]
    lines = [f"{count_text(summary)} dead letter(s) match {filters_text(filters)}"]
    if summary.capped:
        lines.append(f"(counted among the newest {summary.total}; --sample N counts more)")
    lines += ["", *breakdown_table("QUEUE", summary.by_queue)]
    lines += ["", *breakdown_table("ERROR TYPE", summary.by_error_type)]
    if page:
        lines += ["", *dead_table(page)]
    if len(page) == limit:
        lines += ["", f"next page: --after {page[-1].id}"]
    return lines


def count_text(summary: trioqueue.DeadLetterSummary) -> str:
    """``12``, or ``10000+`` when more matched than were counted."""
    return f"{summary.total}+" if summary.capped else str(summary.total)


def breakdown_table(title: str, counts: Sequence[tuple[str | None, int]]) -> list[str]:
    rows = [[clip(NO_ERROR_TYPE if name is None else name, 60), str(n)] for name, n in counts]
    return format_table((title, "COUNT"), rows)


def dead_table(page: Sequence[trioqueue.DeadLetter]) -> list[str]:
    headers = ("ID", "QUEUE", "TRIES", "FAILED", "KIND", "ERROR TYPE", "ERROR")
    rows = [
        [
            str(dead.id),
            clip(dead.queue, 20),
            f"{dead.attempts}/{dead.max_attempts}",
            dead.finished_at.astimezone().strftime("%Y-%m-%d %H:%M:%S"),
            "cancelled" if dead.cancelled else "failed",
            clip(dead.error_type or NO_ERROR_TYPE, 30),
            clip(dead.last_error or "", 50),
        ]
        for dead in page
    ]
    return format_table(headers, rows)


def _run_redrive(args: argparse.Namespace) -> int:
    filters = filters_of(args)
    what = filters_text(filters)
    if not args.yes:
        return unconfirmed(
            run_on_database(args, count_dead, filters), "dead letter", what, "redrive"
        )
    done = run_on_database(args, redrive, filters, args.batch_size)
    say(f"{done} dead letter(s) matching {what} redriven (back on their queues)")
    return 0


async def count_dead(dsn: str, schema: str, filters: dict[str, Any]) -> int:
    """How many dead letters ``filters`` match, exactly."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        summary = await backend.dead_letter_summary(**filters, sample=None)
    return summary.total


async def redrive(dsn: str, schema: str, filters: dict[str, Any], batch_size: int) -> int:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await redrive_on(backend, filters, batch_size)


async def redrive_on(
    backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
    filters: dict[str, Any],
    batch_size: int = 500,
) -> int:
    """Redrive the dead letters ``filters`` match (``retry_matching``); how many."""
    given = dict(filters)
    queue = given.pop("queue", None)
    return await backend.retry_matching(queue, "failed", **given, batch_size=batch_size)
