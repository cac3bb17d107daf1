"""docs/render_reference.py: the named queries and the memory model's methods correspond."""

from __future__ import annotations

import sys
from pathlib import Path

from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.postgres.sql import QUERIES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs"))

import render_reference


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


def test_the_excerpts_of_reference_model_rst_exist() -> None:
    # The page includes the claim and renew queries and methods by these markers.
    sql = (
        Path(__file__).resolve().parents[2] / "trioqueue/_backends/postgres/queries.sql"
    ).read_text(encoding="utf-8")
    for name in ("claim", "renew", "ack"):
        assert f"-- name: {name}\n" in sql
    for method in ("claim", "renew", "_lease", "_renew_one"):
        assert callable(getattr(MemoryModel, method))
