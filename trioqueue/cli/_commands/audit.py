"""``trioqueue audit``: the audit log of the actions taken through the dashboard and its
JSON API, newest first (docs/dashboard.rst, "Audit log")."""

from __future__ import annotations

import argparse
import json

import trioqueue
from trioqueue.cli._commands.common import (
    Subparsers,
    bounded_int,
    run_on_database,
    schema_of,
    subcommand,
)
from trioqueue.cli._escape import say
from trioqueue.cli._terminal import clip, format_table

#: How much of an entry's target and detail the table shows.
TARGET_WIDTH = 40
DETAIL_WIDTH = 60


def add(commands: Subparsers) -> None:
    audit = subcommand(commands, "audit", _run_audit, "list the audit log, newest first")
    audit.add_argument("--action", metavar="ACTION", help="only this action, e.g. job.cancel")
    audit.add_argument("--limit", type=bounded_int(1, 10_000), default=50, metavar="N")
    audit.add_argument("--offset", type=bounded_int(0, 2**63 - 1), default=0, metavar="N")


def _run_audit(args: argparse.Namespace) -> int:
    entries = run_on_database(args, list_audit, args.action, args.limit, args.offset)
    if not entries:
        say(f"no audit entries in schema {schema_of(args)}")
    else:
        say(*audit_table(entries))
    return 0


async def list_audit(
    dsn: str, schema: str, action: str | None, limit: int, offset: int
) -> list[trioqueue.AuditEntry]:
    """One page of the audit log, newest first."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.list_audit(limit, offset, action=action)


def audit_table(entries: list[trioqueue.AuditEntry]) -> list[str]:
    """A row per entry: when (local time), what, on what, by which session, and the detail
    as compact JSON, long cells clipped."""
    headers = ("ID", "AT", "ACTION", "TARGET", "SESSION", "DETAIL")
    rows = [
        [
            str(entry.id),
            entry.at.astimezone().strftime("%Y-%m-%d %H:%M:%S"),
            entry.action,
            clip(entry.target, TARGET_WIDTH),
            entry.session,
            clip(json.dumps(entry.detail, separators=(",", ":"), sort_keys=True), DETAIL_WIDTH),
        ]
        for entry in entries
    ]
    return format_table(headers, rows)
