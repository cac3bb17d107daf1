"""The databases a command works on when it works on several (``worker --database``,
``dashboard --database``; docs/howto/beyond-one-server.rst): ``--dsn`` (else
``$TRIOQUEUE_DSN``) is the database named ``default``, and ``--database NAME=DSN`` (repeatable)
names each further one, with ``--database-schema NAME=SCHEMA`` for a schema of its own (else
``--schema``).

Every problem is collected (:func:`databases_of` appends to a list) so that the command
reports them all in one error before it connects: a malformed ``NAME=VALUE``, a name that is
not one, a name given twice, a DSN that is not one, a schema for no database, one DSN and
schema given under two names. A DSN is only ever shown with its password masked.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trioqueue._backends.postgres.driver import DsnError, mask_dsn, parse_dsn
from trioqueue.cli._commands.common import resolve_dsn, schema_of

__all__ = [
    "DEFAULT_DATABASE",
    "NAME_PATTERN",
    "NAME_RULE",
    "Database",
    "add_database_arguments",
    "databases_of",
]

#: The name of the database of ``--dsn``.
DEFAULT_DATABASE = "default"
#: A database's name: shown in lines and logs, typed after ``@``, and part of the
#: dashboard's URLs (``/db/NAME``), so of the characters a path keeps as they are.
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,62}\Z")
NAME_RULE = "a letter, then up to 62 letters, digits, '_', '.' or '-'"


@dataclass(frozen=True)
class Database:
    """A database a command connects to: its name, DSN, schema and LISTEN DSN."""

    name: str
    dsn: str
    schema: str
    listen_dsn: str | None = None

    @property
    def shown(self) -> str:
        """How lines name it: the DSN, its password masked, and the schema."""
        return f"{mask_dsn(self.dsn)}, schema {self.schema}"


def add_database_arguments(group: argparse._ArgumentGroup, help: str) -> None:
    """``--database NAME=DSN`` (its ``help``) and ``--database-schema NAME=SCHEMA``."""
    group.add_argument("--database", action="append", default=[], metavar="NAME=DSN", help=help)
    group.add_argument(
        "--database-schema",
        action="append",
        default=[],
        metavar="NAME=SCHEMA",
        help="the schema of database NAME (default: --schema)",
    )


def databases_of(
    args: argparse.Namespace,
    listen_dsn: str | None,
    problems: list[str],
    refused: set[str] | None = None,
) -> dict[str, Database]:
    """The databases by name (``default`` first, when there is a DSN for it); each problem
    of ``--database`` and ``--database-schema`` appended to ``problems``, and the names
    given with a DSN that is not one added to ``refused`` (their queues need no problem
    of their own)."""
    schema = schema_of(args)
    schemas = _pairs(args.database_schema, "--database-schema", "NAME=SCHEMA", problems)
    databases: dict[str, Database] = {}
    default = resolve_dsn(args)
    if default is not None:
        databases[DEFAULT_DATABASE] = Database(DEFAULT_DATABASE, default, schema, listen_dsn)
    for name, dsn in _pairs(args.database, "--database", "NAME=DSN", problems).items():
        if name in databases:
            problems.append(f"database {name!r} is given twice: one DSN per name")
            continue
        try:
            parse_dsn(dsn)
        except DsnError as exc:
            problems.append(f"database {name!r}: {exc}")
            if refused is not None:
                refused.add(name)
            continue
        databases[name] = Database(name, dsn, schemas.get(name, schema))
    for name in schemas.keys() - databases.keys():
        problems.append(f"--database-schema {name}: no database is named {name!r}")
    _same_database_twice(databases, problems)
    return databases


def _pairs(options: Sequence[str], option: str, form: str, problems: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` options as a mapping; a malformed one, or a bad name, is a problem
    (shown with its value masked: a DSN may hold a password)."""
    pairs: dict[str, str] = {}
    for text in options:
        name, equals, value = text.partition("=")
        if not equals or not value:
            problems.append(f"{option} {mask_dsn(text)!r}: give {form}")
        elif not NAME_PATTERN.match(name):
            problems.append(f"{option}: the name {name!r} is not one ({NAME_RULE})")
        elif name in pairs and option != "--database":
            problems.append(f"{option} {name}: given twice")
        elif name in pairs:
            problems.append(f"database {name!r} is given twice: one DSN per name")
        else:
            pairs[name] = value
    return pairs


def _same_database_twice(databases: Mapping[str, Database], problems: list[str]) -> None:
    """Two names for one DSN and schema would run two pools of a queue's jobs under names
    that hide it: refused."""
    seen: dict[tuple[str, str], str] = {}
    for database in databases.values():
        key = (database.dsn, database.schema)
        if key in seen:
            problems.append(
                f"databases {seen[key]!r} and {database.name!r} are the same DSN and schema: "
                "give each database once"
            )
        seen.setdefault(key, database.name)


def dashboard_databases(args: argparse.Namespace) -> list[Database] | None:
    """``dashboard``'s databases, or None for one (no ``--database``): ``--dsn``'s, named
    ``default``, first.

    Raises:
        ValueError: listing every problem (the command exits 2), before connecting.
    """
    if not getattr(args, "database", []):
        return None
    problems: list[str] = []
    databases = databases_of(args, None, problems)
    if problems:
        count = len(problems)
        listing = "\n".join(f"  - {problem}" for problem in problems)
        raise ValueError(f"invalid databases ({count} problem{'s' * (count > 1)}):\n{listing}")
    return list(databases.values())
