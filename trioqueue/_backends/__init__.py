"""Where jobs are stored: the Backend protocol and the backends that implement it.

- ``interface.py``: the :class:`~trioqueue._backends.interface.Backend` protocol the runtime
  speaks (and the optional transactional extension).
- ``validation.py``: argument checks and limits every backend applies the same way.
- ``memory/``: the reference model (synchronous, one method per named query) and the
  in-memory backend around it, on trio's clock, with fault injection.
- ``postgres/``: asyncpg under trio-asyncio, the SQL files, and the embedded server.

A concrete backend imports the protocol and the shared modules, never the runtime; the
runtime imports the protocol, never a concrete backend (tests/unit/test_layering.py).
"""
