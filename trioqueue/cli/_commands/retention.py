"""``trioqueue retention [set|clear|audit]``: how long finished jobs and audit entries are
kept, and which pool prunes them (docs/protocol.rst §15, docs/cli.rst).

``retention`` alone shows every setting and the maintainer lease; the actions change one
setting and print them all again, so the operator reads what is now in force. A duration's
spelling, its value and the queue name are checked before connecting
(``trioqueue/cli/_durations.py``, then the backend's own checks, which the backend applies
again): one error names every problem, exit 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable
from typing import Any

import trioqueue
from trioqueue._backends.retention_checks import check_clear_retention, check_retention
from trioqueue.cli._clock import database_now
from trioqueue.cli._commands.common import CliError, Subparsers, run_on_database, subcommand
from trioqueue.cli._durations import duration_text, parse_duration
from trioqueue.cli._escape import say
from trioqueue.cli._terminal import format_age, format_table

#: What ``retention`` reads: every setting, and the maintainer lease (None: never taken).
Settings = tuple[trioqueue.Retention, trioqueue.MaintainerInfo | None]
#: The settings, and the database's clock when they were read: the maintainer lease runs
#: by it, so its time left is counted from it (trioqueue/cli/_clock.py).
Read = tuple[Settings, datetime.datetime]


def add(commands: Subparsers) -> None:
    """``retention``, ``retention set``, ``retention clear``, ``retention audit``."""
    retention = subcommand(
        commands,
        "retention",
        _run_show,
        "show how long finished jobs and audit entries are kept, and the maintainer",
    )
    actions = retention.add_subparsers(title="actions", dest="action", metavar="ACTION")
    set_ = subcommand(
        actions,
        "set",
        _run_set,
        "set a queue's retention, or the default's (the kind not given stays as it is)",
    )
    set_.add_argument("queue", nargs="?", metavar="QUEUE", help="the queue (or --default)")
    set_.add_argument(
        "--default",
        action="store_true",
        help="set the default, for every queue without a policy of its own",
    )
    for kind, what in (("succeeded", "succeeded jobs"), ("failed", "failed and cancelled jobs")):
        set_.add_argument(
            f"--{kind}",
            metavar="DURATION",
            help=f"keep {what} this long after they finished: 90s, 12h, 7d, 1d12h, or forever",
        )
    clear = subcommand(
        actions, "clear", _run_clear, "drop a queue's own retention: the default applies again"
    )
    clear.add_argument("queue", metavar="QUEUE")
    audit = subcommand(actions, "audit", _run_audit, "set how long audit entries are kept")
    audit.add_argument("duration", metavar="DURATION", help="e.g. 90d, or forever")


# -- reading --------------------------------------------------------------------------------


def _run_show(args: argparse.Namespace) -> int:
    say(*settings_report(*run_on_database(args, read_settings)))
    return 0


async def read_settings(dsn: str, schema: str) -> Read:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await _read(backend)


async def _read(backend: trioqueue.PostgresBackend | trioqueue.MemoryBackend) -> Read:
    """Every setting, the maintainer, and the database's now."""
    settings = await backend.get_retention(), await backend.maintainer()
    return settings, await database_now(backend)


def settings_report(settings: Settings, now: datetime.datetime) -> list[str]:
    """The policies (the default first, then each queue's own), the audit log's retention,
    and the maintainer. Queue names are stored text: the table escapes them."""
    retention, maintainer = settings
    rows = [["default", *_keeps(retention.default)]]
    rows += [[f"queue {policy.queue}", *_keeps(policy)] for policy in retention.queues]
    table = format_table(("POLICY", "SUCCEEDED", "FAILED"), rows)
    return [
        *table,
        "",
        f"audit log: kept {duration_text(retention.audit)}",
        f"maintainer: {maintainer_text(maintainer, now)}",
    ]


def _keeps(policy: trioqueue.RetentionPolicy) -> list[str]:
    return [duration_text(policy.succeeded), duration_text(policy.failed)]


def maintainer_text(info: trioqueue.MaintainerInfo | None, now: datetime.datetime) -> str:
    """Who holds the maintainer lease and until when, its time left counted from ``now``
    (the database's clock, which the lease runs by), or that no pool does."""
    if info is None:
        return "none (no pool has taken the lease)"
    until = info.expires_at.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    left = (info.expires_at - now).total_seconds()
    when = f"in {format_age(left)}" if left > 0 else "lapsed: no pool holds it now"
    return f"{info.holder} (lease {info.seq}), until {until} ({when})"


# -- changing ---------------------------------------------------------------------------------


def _run_set(args: argparse.Namespace) -> int:
    queue, changes = policy_request(args)
    say(*settings_report(*run_on_database(args, set_policy, queue, changes)))
    return 0


def policy_request(args: argparse.Namespace) -> tuple[str | None, dict[str, float | None]]:
    """The queue (None: the default) and the keep-times ``set`` names, or a usage error
    naming every problem of the line."""
    problems = []
    if args.default and args.queue is not None:
        problems.append("give a QUEUE or --default, not both")
    elif not args.default and args.queue is None:
        problems.append("give the QUEUE to set, or --default")
    changes: dict[str, float | None] = {}
    for kind in ("succeeded", "failed"):
        text = getattr(args, kind)
        if text is None:
            continue
        try:
            changes[kind] = parse_duration(text)
        except ValueError as exc:
            problems.append(f"--{kind}: {exc}")
    if args.succeeded is None and args.failed is None:
        problems.append("give --succeeded, --failed or both")
    if args.queue is not None or changes:
        problems += _backend_problems(
            lambda: check_retention(args.queue, changes.get("succeeded"), changes.get("failed"))
        )
    if problems:
        raise CliError("; ".join(problems))
    return (None if args.default else args.queue), changes


async def set_policy(
    dsn: str, schema: str, queue: str | None, changes: dict[str, float | None]
) -> Read:
    """Set ``queue``'s policy (None: the default). A kind ``changes`` leaves out keeps the
    value now in force for the queue: its own policy's, else the default's."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        current = await backend.get_retention()
        policy = current.default if queue is None else current.for_queue(queue)
        keep: dict[str, Any] = {"succeeded": policy.succeeded, "failed": policy.failed}
        await backend.set_retention(queue, **(keep | changes))
        return await _read(backend)


def _backend_problems(check: Callable[[], object]) -> list[str]:
    """What the backend's own check says is wrong, asked before connecting: a bad name or
    value is a usage error even when the database cannot be reached."""
    try:
        check()
    except (TypeError, ValueError) as exc:
        return [str(exc)]
    return []


def _run_clear(args: argparse.Namespace) -> int:
    problems = _backend_problems(lambda: check_clear_retention(args.queue))
    if problems:
        raise CliError("; ".join(problems))
    read, had = run_on_database(args, clear_policy, args.queue)
    if not had:
        say(f"queue {args.queue} had no retention of its own: the default applies")
    say(*settings_report(*read))
    return 0


async def clear_policy(dsn: str, schema: str, queue: str) -> tuple[Read, bool]:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        had = await backend.clear_retention(queue)
        return await _read(backend), had


def _run_audit(args: argparse.Namespace) -> int:
    try:
        seconds = parse_duration(args.duration)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    say(*settings_report(*run_on_database(args, set_audit, seconds)))
    return 0


async def set_audit(dsn: str, schema: str, seconds: float | None) -> Read:
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        await backend.set_audit_retention(seconds)
        return await _read(backend)
