"""What every topic's calls of the PostgreSQL backend share.

:class:`~trioqueue._backends.postgres.backend.PostgresBackend` is assembled from one class of
calls per topic (``maintenance.py``, ``producers.py``, ``claims.py``, ...). Each inherits
:class:`BackendBase`, which only declares the state they share, so strict mypy checks every
topic against the same attributes; ``PostgresBackend.__init__`` (``backend.py``) sets them.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from trioqueue._backends.postgres.driver import Driver
from trioqueue._backends.postgres.finishes import FinishWatch
from trioqueue._backends.postgres.replica import ReadRoute


class BackendBase:
    """The state the topic classes share, set by ``PostgresBackend.__init__``."""

    _driver: Driver
    #: Where the operators' read-only calls go: a read replica when there is one
    #: (``replica.py``); writes, claims and lease decisions use ``_driver`` only.
    _reads: ReadRoute
    _schema: str
    #: The NOTIFY channel of the schema.
    _channel: str
    #: ``queries.sql``, ``operator.sql`` and ``retention.sql``, rendered for the schema, by name.
    _sql: dict[str, str]
    #: Transactional handlers' share of the pool (``transactions.py``).
    _transaction_slots: trio.CapacityLimiter
    #: Notices a listener's full buffer dropped (``statistics()``).
    _dropped_notices: int
    #: wait_for's shared LISTEN (``finishes.py``).
    _finishes: FinishWatch
    #: Queues whose last claim found limits: their claims start by locking the queue.
    _limited_queues: set[str]
    #: The worker's wall clock (``wall_time()``).
    wall_clock: Callable[[], float]
