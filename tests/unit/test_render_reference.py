"""docs/render_reference.py: the named queries and the memory model's methods correspond."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.postgres.sql import QUERIES

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import render_reference  # noqa: E402  (docs/ is not a package: put on the path above)


def test_every_named_query_has_a_model_method_or_a_reason() -> None:
    methods = set(render_reference.model_methods())
    for name in QUERIES:
        reason = render_reference.POSTGRES_ONLY.get(name, "")
        assert (name in methods) != bool(reason.strip()), name


def test_every_public_model_method_has_a_query_or_a_reason() -> None:
    for name in render_reference.model_methods():
        if name in QUERIES:
            continue
        if name in render_reference.ALSO_IN:
            assert render_reference.ALSO_IN[name] in QUERIES, name
        else:
            assert render_reference.MODEL_ONLY.get(name, "").strip(), name


def test_no_stale_entries() -> None:
    methods = set(render_reference.model_methods())
    assert set(render_reference.POSTGRES_ONLY) <= set(QUERIES)
    assert set(render_reference.MODEL_ONLY) <= methods - set(QUERIES)
    assert set(render_reference.ALSO_IN) <= methods


def test_the_queries_table_lists_every_query_once() -> None:
    text = render_reference.render_queries()
    for name in QUERIES:
        assert text.count(f"   * - ``{name}``\n") == 1, name
    assert "   * - ``beat``\n" in text


def test_each_sql_excerpt_of_the_page_is_exactly_one_named_query() -> None:
    # reference-model.rst cuts queries.sql from one "-- name:" line to the next: the two
    # must be neighbours in the file, or the excerpt would show other queries too.
    page = (ROOT / "docs" / "reference-model.rst").read_text(encoding="utf-8")
    cuts = re.findall(r":start-at: -- name: (\w+)\n\s*:end-before: -- name: (\w+)", page)
    assert {start for start, _ in cuts} >= {"claim", "renew"}
    names = list(QUERIES)
    for start, end in cuts:
        assert names[names.index(start) + 1] == end, (start, end)


def test_each_model_excerpt_of_the_page_exists() -> None:
    page = (ROOT / "docs" / "reference-model.rst").read_text(encoding="utf-8")
    methods = re.findall(r":pyobject: MemoryModel\.(\w+)", page)
    assert {"claim", "renew"} <= set(methods)
    for method in methods:
        assert callable(getattr(MemoryModel, method)), method
