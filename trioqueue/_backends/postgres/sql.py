"""The SQL of the PostgreSQL backend: named queries, ordered migrations, schema naming.

Theory of operation
-------------------
SQL lives in ``.sql`` files next to this module, never in Python strings: ``queries.sql``
holds named queries (a ``-- name: <name>`` line starts each), ``operator.sql`` those of the
operator's controls, ``retention.sql`` those of retention and ``replica.sql`` those asked of
a read replica (read into the same table), and ``migrations/`` holds
``NNNN_<what>.sql`` files applied in order of their number. Both are read once, at import.

A part that two queries share word for word (a CTE) is written once, as a *fragment*: a
``-- fragment: <name>`` line starts it, like a query, and ``{fragment:<name>}`` in a query
stands for its text. Fragments are filled in at import; they are not queries of their own.

A backend works in one schema. The schema name is the only text ever spliced into SQL, so
it is checked against a strict pattern *and* quoted: :func:`check_schema` refuses anything
else with ``ValueError`` before any SQL exists. :func:`render` then replaces the
``{schema}`` and ``{channel}`` placeholders; every other value travels as a parameter.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

__all__ = [
    "MIGRATIONS",
    "QUERIES",
    "Migration",
    "channel_name",
    "check_schema",
    "parse_queries",
    "quote_identifier",
    "quote_literal",
    "render",
]

#: A schema name trioqueue accepts: a lower-case SQL identifier that needs no case folding.
SCHEMA_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")

#: Longest NOTIFY channel name (PostgreSQL's NAMEDATALEN - 1).
MAX_CHANNEL_LENGTH = 63

_PACKAGE = "trioqueue._backends.postgres"

_NAME_LINE = re.compile(r"--\s*(name|fragment):\s*([a-z_][a-z0-9_]*)\s*$")
_FRAGMENT = re.compile(r"\{fragment:([a-z_][a-z0-9_]*)\}")
_MIGRATION_FILE = re.compile(r"([0-9]{4})_([a-z0-9_]+)\.sql")


def check_schema(schema: object) -> str:
    """The schema name, if it is one trioqueue may use.

    Every way in checks here: ``open_postgres``, the backend itself, and so every command
    of the command line.

    Raises:
        TypeError: ``schema`` is not a str.
        ValueError: it is empty, does not match ``[a-z_][a-z0-9_]{0,62}``, is
            ``information_schema`` or starts with ``pg_`` (PostgreSQL's own schemas:
            trioqueue's tables would be made among the system's).
    """
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a str, not {type(schema).__name__}")
    if not schema:
        raise ValueError("schema must not be empty (leave it out for the default, trioqueue)")
    if schema == "information_schema":
        raise ValueError(
            "schema information_schema is PostgreSQL's own: choose a schema of your own"
        )
    if not SCHEMA_PATTERN.fullmatch(schema):
        raise ValueError(
            f"schema must match [a-z_][a-z0-9_]{{0,62}} (a lower-case SQL identifier), "
            f"not {schema!r}"
        )
    if schema.startswith("pg_"):
        raise ValueError(
            f"schema names starting with 'pg_' are reserved (PostgreSQL's own), not {schema!r}"
        )
    return schema


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier (defence in depth: names are checked first)."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """``text`` as a standard-conforming SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def channel_name(schema: str) -> str:
    """The NOTIFY channel of a schema: ``tq_<schema>``, hashed when that is too long."""
    name = f"tq_{schema}"
    if len(name) <= MAX_CHANNEL_LENGTH:
        return name
    return "tq_" + hashlib.sha256(schema.encode()).hexdigest()[:32]


def render(sql: str, schema: str) -> str:
    """``sql`` with its placeholders filled in for ``schema`` (checked again here)."""
    schema = check_schema(schema)
    return sql.replace("{schema}", quote_identifier(schema)).replace(
        "{channel}", quote_literal(channel_name(schema))
    )


def parse_queries(text: str) -> dict[str, str]:
    """Split a ``.sql`` file into its named queries, each fragment it names filled in.

    Lines before the first ``-- name:`` (or ``-- fragment:``) line are the file's header
    and belong to no query.

    Raises:
        ValueError: a name is used twice, a named query is empty, or a query names a
            fragment the file does not define.
    """
    blocks: dict[str, dict[str, list[str]]] = {"name": {}, "fragment": {}}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _NAME_LINE.fullmatch(line.strip())
        if match:
            kind, name = match.groups()
            if name in blocks["name"] or name in blocks["fragment"]:
                raise ValueError(f"query {name!r} is defined twice")
            current = blocks[kind][name] = []
        elif current is not None:
            current.append(line)
    fragments = {name: "\n".join(lines).strip() for name, lines in blocks["fragment"].items()}
    parsed = {
        name: _fill_fragments("\n".join(lines).strip(), fragments)
        for name, lines in blocks["name"].items()
    }
    empty = [name for name, sql in parsed.items() if not _code(sql)]
    if empty:
        raise ValueError(f"named queries without SQL: {', '.join(empty)}")
    return parsed


def _fill_fragments(sql: str, fragments: dict[str, str]) -> str:
    """``sql`` with each ``{fragment:<name>}`` replaced by that fragment's text."""

    def text(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in fragments:
            raise ValueError(f"no fragment {name!r} in the file")
        return fragments[name]

    return _FRAGMENT.sub(text, sql)


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: applied once per schema, in order of ``version``."""

    version: int
    name: str
    sql: str
    checksum: str  # sha256 of the file, so an edited applied migration is noticed


def _load_migrations() -> tuple[Migration, ...]:
    folder = resources.files(_PACKAGE) / "migrations"
    migrations = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.fullmatch(entry.name)
        if match is None:
            continue
        text = entry.read_text(encoding="utf-8")
        checksum = hashlib.sha256(text.encode()).hexdigest()
        migrations.append(Migration(int(match.group(1)), match.group(2), text, checksum))
    migrations.sort(key=lambda m: m.version)
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"migrations must be numbered 1, 2, 3... without gaps: {versions}")
    return tuple(migrations)


def _code(sql: str) -> str:
    """``sql`` without its comment lines."""
    return "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))


def _load_queries(*names: str) -> dict[str, str]:
    """The named queries of these files, as one table (a name in two files is refused)."""
    queries: dict[str, str] = {}
    for name in names:
        parsed = parse_queries((resources.files(_PACKAGE) / name).read_text(encoding="utf-8"))
        twice = sorted(set(parsed) & set(queries))
        if twice:
            raise ValueError(f"queries defined twice: {', '.join(twice)}")
        queries |= parsed
    return queries


#: Every named query of ``queries.sql``, ``operator.sql``, ``retention.sql``, ``reads.sql``
#: and ``replica.sql`` (what a read replica is asked), placeholders unfilled.
QUERIES: dict[str, str] = _load_queries(
    "queries.sql",
    "operator.sql",
    "retention.sql",
    "reads.sql",
    "replica.sql",
    "dead_letters.sql",
)

#: Every migration, in order.
MIGRATIONS: tuple[Migration, ...] = _load_migrations()
