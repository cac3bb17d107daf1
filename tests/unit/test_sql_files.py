"""How the PostgreSQL backend reads its ``.sql`` files (``trioqueue/_backends/postgres/sql.py``):
named queries, and the fragments that two queries share word for word."""

from __future__ import annotations

import pytest

from trioqueue._backends.postgres.sql import QUERIES, parse_queries

FILE = """\
-- The file's header: no query's.

-- fragment: pair
-- a shared CTE
one AS (SELECT 1 AS n)

-- name: first
WITH {fragment:pair} SELECT n FROM one;

-- name: second
WITH {fragment:pair}, two AS (SELECT 2 AS n) SELECT n FROM one UNION ALL SELECT n FROM two;
"""


def test_a_fragment_is_filled_into_each_query_that_names_it() -> None:
    queries = parse_queries(FILE)
    assert queries == {
        "first": "WITH -- a shared CTE\none AS (SELECT 1 AS n) SELECT n FROM one;",
        "second": "WITH -- a shared CTE\none AS (SELECT 1 AS n), two AS (SELECT 2 AS n) "
        "SELECT n FROM one UNION ALL SELECT n FROM two;",
    }


def test_a_fragment_is_not_a_query() -> None:
    assert "pair" not in parse_queries(FILE)
    assert "retention_keeps" not in QUERIES


def test_every_fragment_named_in_the_package_is_filled_in() -> None:
    assert not [name for name, sql in QUERIES.items() if "{fragment:" in sql]
    assert "keeps AS (" in QUERIES["prune_retained"]
    assert "keeps AS (" in QUERIES["retention_preview"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: q\nSELECT {fragment:missing};", "no fragment 'missing'"),
        ("-- fragment: q\nx\n-- name: q\nSELECT 1;", "defined twice"),
        ("-- name: q\nSELECT 1;\n-- name: q\nSELECT 2;", "defined twice"),
        ("-- name: q\n-- only a comment\n", "without SQL"),
    ],
)
def test_a_broken_file_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_queries(text)
