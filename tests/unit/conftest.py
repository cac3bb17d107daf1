"""Unit tests: no database, seconds in all (``nox -s fast`` runs only these).

The PostgreSQL fixtures of tests/conftest.py are shadowed here: a unit test that asks for
one fails at once, instead of finding or starting a server. Such a test belongs in
tests/postgres/.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    pytest.fail("a unit test asked for PostgreSQL; move it to tests/postgres/")
