"""The in-memory backend: the PostgreSQL backend's semantics, on trio's clock, in one process.

- ``model.py``: :class:`~trioqueue._backends.memory.model.MemoryModel`, the reference model:
  the jobs table and one method per named query of ``queries.sql``, synchronous, no trio.
- ``backend.py``: :class:`MemoryBackend`, the async shell around the model: trio's clock,
  the connection model, fault injection, notices.
- ``faults.py``: the fault descriptions it carries out (public through ``trioqueue.testing``).
"""

from trioqueue._backends.memory.backend import MemoryBackend, open_memory

__all__ = ["MemoryBackend", "open_memory"]
