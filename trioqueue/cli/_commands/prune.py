"""``trioqueue prune``: one pass of retention now, by hand (docs/protocol.rst §15,
docs/cli.rst).

The worker pools' maintainer prunes on its own; this is for an operator who wants the
space back now, or runs no maintainer. A pass deletes what the policies say in bounded
batches (``prune_retained``), each its own short statement, so it never holds locks or a
snapshot long enough to slow the claims of running workers.

A batch is fenced by the maintainer lease, so the command takes that lease first, as a
pool would, renews it between batches and gives it up at the end: two prunes never
run at once, and a pool's maintainer takes the lease back at its next claim. While a live
pool holds the lease the command refuses (that pool prunes by the same policies already)
and says who holds it until when. Like a pool, it keeps the lease's local fence
(docs/protocol.rst §3, §15): the time read before sending its last successful claim or
renewal, plus the lease. Each batch runs under a cancel scope with that deadline, so a
batch still running when the lease may have run out is given up without asking the
database.

``--older-than`` is the older prune, by age alone whatever the policies say
(``PostgresBackend.prune``), in batches too; it needs no lease.

``--dry-run`` deletes nothing and takes no lease: it counts, in one read
(``retention_preview``), what the pass (or the age prune) would delete now.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
from dataclasses import dataclass, field

import trio

import trioqueue
from trioqueue.cli._commands.common import (
    EXIT_FAILED,
    CliError,
    Subparsers,
    bounded_int,
    run_on_database,
    subcommand,
)
from trioqueue.cli._commands.retention import maintainer_text
from trioqueue.cli._durations import duration_text, parse_duration
from trioqueue.cli._escape import say
from trioqueue.cli._terminal import format_age, format_table

#: The lease the command holds while it prunes, renewed after every batch: long enough
#: for a batch on a slow database, short enough that a pool takes over soon after a
#: command that was killed.
LEASE_SECONDS = 60.0
#: Jobs (and, apart, audit entries) one batch deletes at most, by default.
DEFAULT_BATCH = 1000
MAX_BATCH = 100_000


def add(commands: Subparsers) -> None:
    prune = subcommand(
        commands,
        "prune",
        _run_prune,
        "delete the finished jobs and audit entries past their retention now",
    )
    prune.add_argument(
        "--older-than",
        metavar="DURATION",
        help="instead: delete every finished job that finished more than DURATION ago, "
        "whatever its retention says (e.g. 30d)",
    )
    prune.add_argument(
        "--dry-run",
        action="store_true",
        help="delete nothing: count what would be deleted now, per queue and status",
    )
    prune.add_argument(
        "--batch-size",
        type=bounded_int(1, MAX_BATCH),
        default=DEFAULT_BATCH,
        metavar="N",
        help="jobs deleted per statement (default: %(default)s)",
    )


@dataclass
class PassReport:
    """What one manual pass deleted, summed over its batches."""

    deleted: dict[tuple[str, str], int] = field(default_factory=dict)
    audit_deleted: int = 0
    batches: int = 0
    oldest_finished_age: float | None = None
    lost_lease: bool = False  # another holder took the lease between two batches

    def add(self, batch: trioqueue.PruneBatch) -> None:
        for key, count in batch.deleted.items():
            self.deleted[key] = self.deleted.get(key, 0) + count
        self.audit_deleted += batch.audit_deleted
        self.batches += 1
        self.oldest_finished_age = batch.oldest_finished_age


def _run_prune(args: argparse.Namespace) -> int:
    older_than = None if args.older_than is None else _older_than(args.older_than)
    if args.dry_run:
        say(*preview_report(run_on_database(args, preview, older_than), older_than))
        return 0
    if older_than is None:
        say(*pass_report(run_on_database(args, prune_by_policy, args.batch_size)))
        return 0
    deleted, batches = run_on_database(args, prune_by_age, older_than, args.batch_size)
    say(
        f"pruned {deleted} job{_s(deleted)} finished more than {duration_text(older_than)} "
        f"ago, in {batches} batch{'' if batches == 1 else 'es'}"
    )
    return 0


def _older_than(text: str) -> float:
    try:
        older_than = parse_duration(text)
    except ValueError as exc:
        raise CliError(f"--older-than: {exc}") from None
    if older_than is None:
        raise CliError(f"--older-than: {text!r} would delete nothing")
    return older_than


def holder_name() -> str:
    """The lease holder this command names itself: which command, where (a pool is named
    by its worker id, ``host:pid:...``)."""
    return f"trioqueue-prune@{socket.gethostname()}:{os.getpid()}"


async def prune_by_policy(dsn: str, schema: str, batch_size: int) -> PassReport:
    """Take the maintainer lease, run batches until one says there is no more, give the
    lease back.

    Raises:
        CliError: a live pool holds the lease (exit 1).
    """
    holder = holder_name()
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        sent = trio.current_time()
        seq = await backend.claim_maintainer(holder, LEASE_SECONDS)
        if seq is None:
            held = maintainer_text(await backend.maintainer(), _now())
            raise CliError(
                f"the maintainer lease is held by {held}: that pool prunes by these "
                "policies on its own; try again once it stops, or use --older-than",
                EXIT_FAILED,
            )
        report = PassReport()
        try:
            await _batches(backend, holder, seq, sent + LEASE_SECONDS, batch_size, report)
        finally:
            await backend.release_maintainer(holder, seq)
        return report


async def _batches(
    backend: trioqueue.PostgresBackend,
    holder: str,
    seq: int,
    fence: float,
    limit: int,
    report: PassReport,
) -> None:
    """Batches until one says there is no more, renewing the lease after each; every
    call under the local ``fence``, which moves with each renewal that succeeds (an
    answer arriving after the fence revives nothing)."""
    while True:
        batch: trioqueue.PruneBatch | None = None
        with trio.move_on_at(fence):
            batch = await backend.prune_retained(seq, limit=limit)
        if batch is None:  # past the local fence, or the fence moved on
            break
        report.add(batch)
        if not batch.more:
            return
        sent, renewed = trio.current_time(), False
        with trio.move_on_at(fence):
            renewed = await backend.renew_maintainer(holder, seq, LEASE_SECONDS)
        if not renewed:
            break
        fence = sent + LEASE_SECONDS
    report.lost_lease = True  # the lease may be another's now: it prunes the rest


async def prune_by_age(
    dsn: str, schema: str, older_than: float, batch_size: int
) -> tuple[int, int]:
    """Delete every job finished more than ``older_than`` seconds ago, ``batch_size`` at a
    time: how many, in how many batches."""
    deleted = batches = 0
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        while True:
            count = await backend.prune(older_than, limit=batch_size)
            deleted, batches = deleted + count, batches + 1
            if count < batch_size:
                return deleted, batches


async def preview(dsn: str, schema: str, older_than: float | None) -> trioqueue.RetentionPreview:
    """Count what a pass (``older_than`` None) or the age prune would delete now."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.retention_preview(older_than=older_than)


def preview_report(found: trioqueue.RetentionPreview, older_than: float | None) -> list[str]:
    """A row per queue and kind of job that would be deleted, then the totals. Queue names
    are stored text: the table escapes them."""
    lines = []
    if found.due:
        rows = [[queue, status, str(n)] for (queue, status), n in sorted(found.due.items())]
        lines += [*format_table(("QUEUE", "STATUS", "WOULD DELETE"), rows), ""]
    jobs = found.jobs_due
    if older_than is None:
        audit = found.audit_due
        what = (
            f"would prune {jobs} job{_s(jobs)} and {audit} audit "
            f"entr{'y' if audit == 1 else 'ies'} past their retention"
        )
    else:
        what = (
            f"would prune {jobs} job{_s(jobs)} finished more than {duration_text(older_than)} ago"
        )
    return [*lines, what, "dry run: nothing was deleted"]


def pass_report(report: PassReport) -> list[str]:
    """A row per queue and kind of job deleted, then the totals and the oldest finished
    job kept. Queue names are stored text: the table escapes them."""
    lines = []
    if report.deleted:
        rows = [
            [queue, status, str(count)] for (queue, status), count in sorted(report.deleted.items())
        ]
        lines += [*format_table(("QUEUE", "STATUS", "DELETED"), rows), ""]
    jobs = sum(report.deleted.values())
    lines.append(
        f"pruned {jobs} job{_s(jobs)} and {report.audit_deleted} audit "
        f"entr{'y' if report.audit_deleted == 1 else 'ies'} in {report.batches} "
        f"batch{'' if report.batches == 1 else 'es'}"
    )
    lines.append(f"oldest finished job kept: {_oldest(report.oldest_finished_age)}")
    if report.lost_lease:
        lines.append(
            "stopped early: the maintainer lease ran out or was taken over; "
            "the maintainer prunes the rest"
        )
    return lines


def _oldest(age: float | None) -> str:
    return "none" if age is None else f"finished {format_age(age)} ago"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
