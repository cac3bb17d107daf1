"""``trioqueue status``: jobs per queue and state, and the registered worker pools."""

from __future__ import annotations

import argparse
import collections
import datetime
from collections.abc import Collection, Mapping

import trioqueue
from trioqueue.cli._commands.common import (
    JOB_STATUSES,
    Subparsers,
    add_read_dsn_option,
    read_replica,
    resolve_read_dsn,
    run_on_database,
    schema_of,
    subcommand,
)
from trioqueue.cli._commands.queue import flow_text
from trioqueue.cli._escape import say
from trioqueue.cli._terminal import count_text, format_age, format_table
from trioqueue.cli._words import CLOCK_FLAGS, LIVE, STALE

#: The states whose counts a big table estimates (QueueStats.estimated).
FINISHED = ("succeeded", "failed")


def add(commands: Subparsers) -> None:
    status = subcommand(
        commands,
        "status",
        _run_status,
        "count jobs per queue and state, age of the oldest ready; list the worker pools",
    )
    add_read_dsn_option(status)


def _run_status(args: argparse.Namespace) -> int:
    counts, oldest, pools, flow, estimated = run_on_database(
        args, count_jobs, resolve_read_dsn(args)
    )
    if counts:
        say(*status_table(counts, oldest, flow, estimated))
    else:
        say(f"no jobs in schema {schema_of(args)}")
    say("")
    if pools:
        say(*workers_table(pools, datetime.datetime.now(datetime.UTC)))
    else:
        say(f"no worker pools in schema {schema_of(args)}")
    return 0


async def count_jobs(
    dsn: str, schema: str, read_dsn: str | None = None
) -> tuple[
    dict[str, collections.Counter[str]],
    dict[str, float | None],
    list[trioqueue.WorkerInfo],
    dict[str, str],
    set[str],
]:
    """Jobs per queue and state, each queue's oldest ready age and flow control (one
    call: configured queues without jobs are listed too), the registered worker pools
    (another), both on the replica at ``read_dsn`` if given; and the queues whose finished
    counts are estimates (``QueueStats.estimated``: a big table)."""
    async with trioqueue.open_postgres(
        dsn, schema=schema, max_connections=1, **read_replica(read_dsn)
    ) as backend:
        stats = await backend.queue_stats()
        pools = await backend.list_workers()
    counts: dict[str, collections.Counter[str]] = {
        queue: collections.Counter(s.counts) for queue, s in stats.items()
    }
    oldest = {queue: s.oldest_ready_age for queue, s in stats.items()}
    flow = {queue: flow_text(s) for queue, s in stats.items()}
    estimated = {queue for queue, s in stats.items() if s.estimated}
    return counts, oldest, pools, flow, estimated


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
    estimated: Collection[str] = (),
) -> list[str]:
    """A row per queue, a column per state, totals, the oldest ready job's age, and the
    queue's flow control (:func:`flow_text`). A queue in ``estimated`` has estimated
    finished counts (a big table): they and its total are marked ``~``, as on the
    dashboard; live counts are always exact."""
    headers = (
        "QUEUE", *(status.upper() for status in JOB_STATUSES), "TOTAL", "OLDEST READY", "FLOW"
    )  # fmt: skip
    flow = flow or {}
    rows = [
        [
            queue,
            *(
                count_text(counter[status], queue in estimated and status in FINISHED)
                for status in JOB_STATUSES
            ),
            count_text(counter.total(), queue in estimated),
            format_age(oldest.get(queue)),
            flow.get(queue, "-"),
        ]
        for queue, counter in sorted(counts.items())
    ]
    return format_table(headers, rows)
