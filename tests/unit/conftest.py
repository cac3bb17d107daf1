"""Unit tests: no database, seconds in all (``nox -s fast`` runs only these).

The PostgreSQL fixtures of tests/conftest.py are shadowed here: a unit test that asks for
one fails at once, instead of finding or starting a server. Such a test belongs in
tests/postgres/.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import trioqueue


@pytest.fixture
async def backend() -> AsyncIterator[trioqueue.MemoryBackend]:
    """A memory backend for the test (modules and suites with their own override it)."""
    async with trioqueue.open_memory() as b:
        yield b


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    pytest.fail("a unit test asked for PostgreSQL; move it to tests/postgres/")
