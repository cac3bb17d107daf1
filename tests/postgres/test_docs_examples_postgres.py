"""The docs' examples that need PostgreSQL run, each against a fresh schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.unit.test_docs_examples import examples, load

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("path", examples(postgres=True), ids=lambda p: p.stem)
def test_postgres_example_runs(path: Path, postgres_dsn: str, postgres_schema: str) -> None:
    trio.run(load(path).main, postgres_dsn, postgres_schema)
