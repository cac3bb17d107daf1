"""The ``trioqueue`` command line (the console script ``trioqueue.cli:main``).

- ``_commands.py``: the parser, the subcommands and :func:`main`.
- ``_demo.py``: the ``demo`` subcommand's jobs, live view and verdict.
- ``_terminal.py``: terminal helpers (tables, live blocks, library logs).

It stands on the public API (``trioqueue``, ``trioqueue.testing``); the few private imports
it needs are listed, with their reasons, in tests/unit/test_layering.py.
"""

from trioqueue.cli._commands import main

__all__ = ["main"]
