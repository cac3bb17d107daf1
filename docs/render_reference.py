"""Render the tables of docs/guarantees.rst and docs/reference-model.rst.

Run by ``docs/conf.py`` at every docs build, into ``docs/_generated/``, so the pages show
what the code and the data say today:

- the guarantees and what backs them, from ``proofs/backers.py`` (which also renders the
  table of proofs/README.md);
- the named queries of the PostgreSQL backend (``queries.sql``) beside the methods of the
  memory backend's row model (``MemoryModel``), the porter's reference for the SQL side.
  A named query with no model method must be in :data:`POSTGRES_ONLY` with its reason, and
  a public model method with no query in :data:`MODEL_ONLY` (tests/unit/test_render_reference.py).

``python docs/render_reference.py`` prints both.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

from render_rules import list_table  # docs/ is on the path: conf.py and the tests put it there

from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.postgres.sql import QUERIES

ROOT = Path(__file__).resolve().parent.parent

#: Named queries the model has no method for, and why.
POSTGRES_ONLY: dict[str, str] = {
    "replica_lag": (
        'how far a read replica is behind its primary (docs/postgres.rst, "Read '
        'replicas"); the model has no replica'
    ),
    "migrate_lock": "migrations: the model has no schema to migrate",
    "migrate_prepare": "migrations: the model has no schema to migrate",
    "applied_migrations": "migrations: the model has no schema to migrate",
    "record_migration": "migrations: the model has no schema to migrate",
    "lock_queue": (
        "the first step of a claim on a queue with limits, which takes the queue's row lock "
        "so that claims take turns; the model's ``claim`` is one step, as nothing runs "
        "beside it"
    ),
    "database_now": (
        "reads the database's clock before ``set_schedule``; the model's clock is the "
        "``now`` every method takes"
    ),
    "database_clock": (
        "the clock probe of a pool that stopped claiming for clock skew (docs/protocol.rst "
        "§8); the model's clock is the ``now`` every method takes, which the memory backend "
        "answers as its ``database_clock``"
    ),
    "get_schedule": (
        "reads back the schedule ``set_schedule`` wrote; the model's ``set_schedule`` returns it"
    ),
    "schedule_clock": (
        "reads a schedule and the database's clock before ``set_schedule_enabled``; the "
        "model's clock is the ``now`` every method takes"
    ),
    "table_sizes": (
        "PostgreSQL's catalogs: the sizes of the schema's tables and indexes; the model's "
        "``table_health`` counts its rows instead (nothing is on disk)"
    ),
    "oldest_work": "the oldest running and ready jobs, which the model's ``table_health`` finds",
    "live_stats": (
        "unfinished jobs per queue and state, from the partial claim indexes: the model's "
        "``counts`` and ``queue_stats`` count them with the finished ones"
    ),
    "configured_queues": (
        "the ``queues`` rows ``queue_stats`` reports flow control from; the model's "
        "``queue_stats`` reads its settings"
    ),
    "finished_probe": (
        "whether the table holds more finished jobs than are counted exactly; the model "
        "counts every row exactly, at no cost"
    ),
    "finished_counts": "finished jobs per queue and state, which the model's ``counts`` counts",
    "finished_estimates": (
        "finished jobs per queue and state from the planner's statistics, past the exact "
        "limit; the model has no statistics and counts exactly"
    ),
}

#: Model methods that are part of a named query other than their own name.
ALSO_IN: dict[str, str] = {
    "beat": "renew",
    "counts": "live_stats",
    "queue_stats": "live_stats",
}

#: What the methods of :data:`ALSO_IN` are for, in the table of methods with no query.
ALSO_IN_TEXT: dict[str, str] = {
    "beat": "the beat part of ``renew`` (a lone beat is ``renew`` with no jobs)",
    "counts": (
        "``live_stats`` for unfinished jobs, with ``finished_counts`` (or, past the exact "
        "limit, ``finished_estimates``) for finished ones"
    ),
    "queue_stats": "``counts`` as ``counts`` reads them, with ``configured_queues``",
}

#: Public model methods with no named query, and why.
MODEL_ONLY: dict[str, str] = {
    "take_notices": "hands the shell the notices a statement would send (``pg_notify``)",
    "rows": "inspection, for tests",
    "attempt_rows": "inspection, for tests: one job's rows of the attempts table",
    "lock_rows": "a testing hook: rows another transaction holds (``SKIP LOCKED`` skips them)",
    "unlock_rows": "a testing hook: releases what ``lock_rows`` held",
    "locked_rows": "a testing hook: the rows ``lock_rows`` holds",
    "expire": "a testing hook: ends a row's lease now",
    "move_schedule": "a testing hook: sets a schedule's next run",
    "to_datetime": "maps a model time to the wall-clock datetime it stands for",
    "table_health": (
        "row counts and the oldest work: what ``table_sizes`` and ``oldest_work`` read"
    ),
    "list_jobs": (
        "PostgreSQL builds this statement from fixed fragments per call (job_lists.py: "
        "the filters given, a cursor, the sort), so it has no one named query"
    ),
    "count_jobs": "built as ``list_jobs``' statement is (job_lists.py), counted",
}


def model_methods() -> list[str]:
    """The public methods of ``MemoryModel``, in the order of its source."""
    return [
        name
        for name, member in vars(MemoryModel).items()
        if not name.startswith("_") and inspect.isfunction(member)
    ]


def _first_sentence(text: str | None) -> str:
    if not text:
        return ""
    paragraph = inspect.cleandoc(text).split("\n\n")[0].replace("\n", " ")
    sentence = paragraph.split("; mirrors")[0].split(". ")[0].rstrip(".")
    return sentence + "."


def _sql_comment(query: str) -> str:
    lines = []
    for line in query.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line.removeprefix("--").strip())
    text = " ".join(lines)
    return text.split(". ")[0].rstrip(".") + "." if text else ""


def render_queries() -> str:
    """The named queries beside the model's methods, as reStructuredText."""
    methods = set(model_methods())
    rows: list[tuple[str, str, str]] = []
    for name, query in QUERIES.items():
        also = [m for m, q in ALSO_IN.items() if q == name]
        if name in methods:
            model = ", ".join(f"``{m}``" for m in [name, *also])
            what = _first_sentence(getattr(MemoryModel, name).__doc__)
        else:
            model = "PostgreSQL only"
            what = POSTGRES_ONLY.get(name, _sql_comment(query))
        rows.append((f"``{name}``", model, what))
    queries = list_table(
        "The named queries of ``queries.sql`` and the model's methods",
        ("named query", "model", "what it does"),
        rows,
    )
    model_only = list_table(
        "The model's methods with no query of their own",
        ("method", "what it is for"),
        [
            (f"``{m}``", ALSO_IN_TEXT.get(m, MODEL_ONLY.get(m, "")))
            for m in model_methods()
            if m not in QUERIES
        ],
    )
    return queries + "\n" + model_only


def _load_backers() -> ModuleType:
    name = "_proofs_backers"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "proofs" / "backers.py")
    if spec is None or spec.loader is None:
        raise ImportError("cannot load proofs/backers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def render_guarantees() -> str:
    """The guarantees and their backers (``proofs/backers.py``), as reStructuredText."""
    text: str = _load_backers().render_rst(ROOT)
    return text


def write(folder: Path) -> None:
    """Write ``guarantees.rst`` and ``queries.rst`` into ``folder``."""
    folder.mkdir(exist_ok=True)
    (folder / "guarantees.rst").write_text(render_guarantees(), encoding="utf-8")
    (folder / "queries.rst").write_text(render_queries(), encoding="utf-8")


if __name__ == "__main__":
    print(render_guarantees())
    print(render_queries())
