"""``trioqueue migrate``: create the schema or bring it up to date."""

from __future__ import annotations

import argparse

import trioqueue
from trioqueue.cli._commands.common import Subparsers, run_on_database, schema_of, subcommand
from trioqueue.cli._escape import say


def add(commands: Subparsers) -> None:
    subcommand(
        commands, "migrate", _run_migrate, "create the schema or bring it up to date (idempotent)"
    )


def _run_migrate(args: argparse.Namespace) -> int:
    applied: list[str] = run_on_database(args, migrate)
    if applied:
        say(f"schema {schema_of(args)}: applied {', '.join(applied)}")
    else:
        say(f"schema {schema_of(args)} is already up to date")
    return 0


async def migrate(dsn: str, schema: str) -> list[str]:
    """Create ``schema`` or bring it up to date; the migrations applied."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        return await backend.migrate()
