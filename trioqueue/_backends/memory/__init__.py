"""The in-memory backend: the PostgreSQL backend's semantics, on trio's clock, in one process.

- ``backend.py``: :class:`MemoryBackend`, rows in a dict, one connection model, notices.
- ``faults.py``: the fault descriptions it carries out (public through ``trioqueue.testing``).
"""

from trioqueue._backends.memory.backend import MemoryBackend, open_memory

__all__ = ["MemoryBackend", "open_memory"]
