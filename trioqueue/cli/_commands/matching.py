"""``retry --all-matching`` and ``delete --all-matching``: one operation on every job a
filter matches, done by the backend in bounded batches (``retry_matching``,
``delete_matching``, docs/api.rst).

Nothing is done unconfirmed: without ``--yes`` the command counts the jobs that match and
exits 1, saying how many and how to go on, so that a filter is read before it acts. With
``--yes`` it acts at once and says how many jobs it retried or deleted (a job may change
between the count and the act: the act's own count is the one printed).
"""

from __future__ import annotations

import argparse
from typing import Any, Literal

import trioqueue
from trioqueue.cli._commands.common import EXIT_FAILED, CliError, run_on_database
from trioqueue.cli._commands.filters import add_filters, filters_of, filters_text
from trioqueue.cli._escape import say

Operation = Literal["retry", "delete"]
#: How each operation says what it did to its jobs.
DONE = {"retry": "retried (back on their queues)", "delete": "deleted"}


def add_matching(parser: argparse.ArgumentParser, operation: Operation) -> None:
    """``--all-matching``, its filters and ``--yes`` on ``parser`` (a retry acts on failed
    jobs only, so it takes no ``--status``)."""
    group = parser.add_argument_group("every job that matches (instead of ID)")
    group.add_argument(
        "--all-matching",
        action="store_true",
        help=f"{operation} every job the filters below match, in batches",
    )
    add_filters(group, status=operation == "delete")
    group.add_argument(
        "--yes", action="store_true", help="do it (without: count the jobs that match, exit 1)"
    )


def given_filters(args: argparse.Namespace) -> dict[str, Any]:
    """The filters of ``args``, checked against the ID (exactly one of the two ways)."""
    filters = filters_of(args)
    if args.job_id is not None and (args.all_matching or filters or args.yes):
        raise CliError("give ID or --all-matching with its filters, not both")
    if args.job_id is None and not args.all_matching:
        raise CliError("give the job's ID, or --all-matching with filters")
    return filters


def run_matching(args: argparse.Namespace, operation: Operation) -> int:
    filters = given_filters(args)
    if operation == "retry":
        filters["status"] = "failed"
    what = filters_text(filters)
    if not args.yes:
        return unconfirmed(run_on_database(args, count_matching, filters), "job", what, operation)
    done = run_on_database(args, act_on_matching, operation, filters)
    say(f"{done} job(s) matching {what} {DONE[operation]}")
    return 0


def unconfirmed(count: int, noun: str, what: str, verb: str) -> int:
    """A bulk action without ``--yes``: 0 when nothing matches (nothing to do), else a
    refusal naming the count and the way on (exit 1). ``dead redrive`` says it so too."""
    if count == 0:
        say(f"no {noun} matches {what}: nothing to {verb}")
        return 0
    raise CliError(
        f"{count} {noun}(s) match {what}; nothing done: add --yes to {verb} them", EXIT_FAILED
    )


async def count_matching(dsn: str, schema: str, filters: dict[str, Any]) -> int:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.count_jobs(**filters)


async def act_on_matching(
    dsn: str, schema: str, operation: Operation, filters: dict[str, Any]
) -> int:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await act_on(backend, operation, filters)


async def act_on(
    backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
    operation: Operation,
    filters: dict[str, Any],
) -> int:
    """Retry or delete the jobs ``filters`` match; how many."""
    if operation == "retry":
        return await backend.retry_matching(**filters)
    return await backend.delete_matching(**filters)
