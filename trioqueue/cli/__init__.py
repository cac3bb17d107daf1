"""The ``trioqueue`` command line (the console script ``trioqueue.cli:main``).

- ``_commands/``: :func:`main`, the parser, and one module per command group (worker, jobs,
  queue, schedule, ...), each owning its subcommands' parsers and run functions.
- ``_demo.py``: the ``demo`` subcommand's jobs, live view and verdict.
- ``_terminal.py``: terminal helpers (tables, live blocks, library logs).
- ``_escape.py``: stored text made safe to show (every printer's one escape function).
- ``_schedule.py``, ``_watch.py``, ``_dashboard.py``: ``schedule``, ``jobs --watch`` and
  ``dashboard``.
- ``_worker_lines.py``, ``_worker_defaults.py``: the worker's own lines (text or JSON),
  the log level, and the pool options' defaults.
- ``_health.py``: the worker's liveness and readiness (``/livez``, ``/readyz``,
  ``--liveness-file``).
- ``_broken_pipe.py``, ``_words.py``: a reader that stops early; the words for states.

It stands on the public API (``trioqueue``, ``trioqueue.testing``); the few private imports
it needs are listed, with their reasons, in tests/unit/test_layering.py.
"""

from trioqueue.cli._commands import main

__all__ = ["main"]
