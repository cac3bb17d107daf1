"""The PostgreSQL backend: asyncpg under trio-asyncio, SQL in ``.sql`` files.

- ``sql.py``: named queries (``queries.sql``), ordered migrations (``migrations/``), and the
  checked, quoted schema name, the only text ever spliced into SQL.
- ``driver.py``: the trio-asyncio bridge; one crossing per operation.
- ``connections.py``: the asyncpg connection pool under the driver (asyncio code).
- ``sqlstate.py``: asyncpg's errors as ``BackendError``, transient or not (the one place
  that decides).
- ``backend.py``: :class:`PostgresBackend`, the Backend protocol on those two.
- ``embedded.py``: a PostgreSQL server shipped in a wheel (pgserver), for the demo and tests.
"""

from trioqueue._backends.postgres.backend import PostgresBackend, open_postgres

__all__ = ["PostgresBackend", "open_postgres"]
