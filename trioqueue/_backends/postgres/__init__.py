"""The PostgreSQL backend: asyncpg under trio-asyncio, SQL in ``.sql`` files.

- ``sql.py``: named queries (``queries.sql``), ordered migrations (``migrations/``), and the
  checked, quoted schema name, the only text ever spliced into SQL.
- ``driver.py``: the trio-asyncio bridge; one crossing per operation.
- ``connections.py``: the asyncpg connection pool under the driver (asyncio code).
- ``replica.py``: the operators' reads on a streaming replica (``read_dsn``), falling back
  to the primary.
- ``sqlstate.py``: asyncpg's errors as ``BackendError``, transient or not (the one place
  that decides).
- ``backend.py``: :class:`PostgresBackend`, the Backend protocol on those two, assembled
  from one class of calls per topic (``base.py`` declares their shared state):
  ``maintenance.py``, ``transactions.py``, ``producers.py``, ``controls.py``, ``reads.py``,
  ``waits.py``, ``flow.py``, ``schedules.py``, ``claims.py``, ``outcomes.py``,
  ``notices.py``, ``retention.py``; helpers ``statements.py``, ``arguments.py``, ``rows.py``.
- ``embedded.py``: a PostgreSQL server shipped in a wheel (pgserver), for the demo and tests.
"""

from trioqueue._backends.postgres.backend import PostgresBackend, open_postgres

__all__ = ["PostgresBackend", "open_postgres"]
