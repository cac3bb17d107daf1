"""Which database each of ``trioqueue worker``'s queues runs on (docs/cli.rst, "worker over
several databases"; docs/howto/beyond-one-server.rst).

The options, read before connecting:

- ``--dsn`` (else ``$TRIOQUEUE_DSN``) is the database named ``default``: every queue not
  placed elsewhere runs there;
- ``--database NAME=DSN`` (repeatable) names a further database; ``--database-schema
  NAME=SCHEMA`` gives it a schema of its own (else ``--schema``);
- a queue is placed on one with ``--queue Q=MODULE:HANDLER@NAME`` (a module path cannot
  hold an ``@``, so the suffix cannot be read as part of it; a queue name can, so there is
  no ``Q@NAME`` form), or with ``--queues-on NAME=Q1,Q2`` for the queues of
  ``MODULE:HANDLER --queue Q`` or of a mapping.

Every problem of these options is found and reported at once, in one error (exit 2), before
anything connects: a malformed ``NAME=VALUE``, a name that is not one, a database named
twice or given twice, a DSN that is not one, a queue placed on an unknown database or on
two, a queue placed that the worker does not run, a database that serves no queue, queues
left on ``default`` with no DSN for it. A DSN is only ever shown with its password masked.

Without ``--database`` or ``--queues-on`` or an ``@NAME``, :func:`database_groups` returns
None and the worker runs as it always did, on one database.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import trioqueue
from trioqueue.cli._commands.common import CliError
from trioqueue.cli._databases import (
    DEFAULT_DATABASE,
    NAME_PATTERN,
    NAME_RULE,
    Database,
    add_database_arguments,
    databases_of,
)

__all__ = [
    "DEFAULT_DATABASE",
    "Database",
    "Group",
    "add_arguments",
    "database_groups",
    "take_placements",
]


@dataclass(frozen=True)
class Group:
    """A database and the pools that run on it."""

    database: Database
    configs: tuple[trioqueue.WorkerConfig, ...]


def add_arguments(worker: argparse.ArgumentParser) -> None:
    """The options of queues over several databases, as a group of ``worker``'s."""
    group = worker.add_argument_group(
        "several databases (docs/howto/beyond-one-server.rst)",
        f"--dsn is the database named {DEFAULT_DATABASE!r}; the queues not placed elsewhere "
        "run there",
    )
    add_database_arguments(
        group,
        "a further database, named NAME, for the queues placed on it (repeatable; "
        "default: none, every queue on --dsn's)",
    )
    group.add_argument(
        "--queues-on",
        action="append",
        default=[],
        metavar="NAME=Q1,Q2",
        help="run these queues (of MODULE:HANDLER --queue Q or of a mapping) on database "
        "NAME; --queue Q=MODULE:HANDLER@NAME places one queue and its handler (repeatable; "
        f"default: a queue not placed runs on {DEFAULT_DATABASE!r})",
    )


@dataclass(frozen=True)
class _Placed:
    queue: str
    database: str
    how: str  # the option that placed it, as typed, for the error that names it


def take_placements(args: argparse.Namespace) -> list[_Placed]:
    """The ``@NAME`` of each ``--queue Q=MODULE:HANDLER@NAME``, taken off ``args.queue`` (which
    then reads as it always did), with the queues of ``--queues-on``."""
    placed: list[_Placed] = []
    queues: list[str] = []
    for option in args.queue:
        queue, equals, spec = option.partition("=")
        target, at, name = spec.rpartition("@")
        if equals and at:
            placed.append(_Placed(queue, name, f"--queue {option}"))
            option = f"{queue}={target}"
        queues.append(option)
    args.queue = queues
    for option in getattr(args, "queues_on", []):
        name, equals, listed = option.partition("=")
        for queue in listed.split(",") if equals else []:
            placed.append(_Placed(queue.strip(), name, f"--queues-on {option}"))
    return placed


def database_groups(
    args: argparse.Namespace,
    configs: Sequence[trioqueue.WorkerConfig],
    placed: Sequence[_Placed],
    listen_dsn: str | None,
) -> list[Group] | None:
    """Each database and its pools, or None when the worker runs on one database.

    ``listen_dsn`` is the LISTEN DSN of the default database (``--listen-dsn``).

    Raises:
        CliError: listing every problem of the options (exit 2), before connecting.
    """
    if not (args.database or getattr(args, "queues_on", []) or placed):
        return None
    problems: list[str] = []
    refused: set[str] = set()
    databases = databases_of(args, listen_dsn, problems, refused)
    where = _where(configs, placed, databases, problems, refused)
    groups = [
        Group(database, tuple(c for c in configs if where.get(c.queue) == database.name))
        for database in databases.values()
    ]
    for group in groups:
        if not group.configs and group.database.name != DEFAULT_DATABASE:
            problems.append(
                f"database {group.database.name!r} serves no queue: place queues on it with "
                f"--queue Q=MODULE:HANDLER@{group.database.name} or --queues-on "
                f"{group.database.name}=Q1,Q2"
            )
    unplaced = [c.queue for c in configs if c.queue not in where]
    if unplaced:
        names = ", ".join(repr(queue) for queue in unplaced)
        problems.append(
            f"no database for queue{'s' if len(unplaced) > 1 else ''} {names}: give --dsn "
            "(or $TRIOQUEUE_DSN) for the default database, or place them with @NAME or "
            "--queues-on"
        )
    if problems:
        raise CliError(str(trioqueue.ConfigError(problems)))
    return [group for group in groups if group.configs]


def _where(
    configs: Sequence[trioqueue.WorkerConfig],
    placed: Sequence[_Placed],
    databases: Mapping[str, Database],
    problems: list[str],
    refused: set[str],
) -> dict[str, str]:
    """Each queue's database name; the problems of the placements appended (none for a
    queue placed on a database whose DSN was refused: that problem is listed already)."""
    run = {config.queue for config in configs}
    where: dict[str, str] = {}
    how: dict[str, str] = {}
    for place in placed:
        if place.database in refused:
            where.setdefault(place.queue, place.database)
        elif place.database not in databases and NAME_PATTERN.match(place.database):
            known = ", ".join(databases) or "none"
            problems.append(
                f"{place.how}: no database is named {place.database!r} (known: {known})"
            )
        elif place.database not in databases:
            problems.append(f"{place.how}: the name {place.database!r} is not one ({NAME_RULE})")
        elif place.queue not in run:
            problems.append(f"{place.how}: queue {place.queue!r} is not one this worker runs")
        elif place.queue in where:
            problems.append(
                f"queue {place.queue!r} is placed twice ({how[place.queue]}; {place.how}): "
                "a queue runs on one database"
            )
        else:
            where[place.queue] = place.database
            how[place.queue] = place.how
    if DEFAULT_DATABASE in databases:
        for queue in run - where.keys():
            where[queue] = DEFAULT_DATABASE
    return where
