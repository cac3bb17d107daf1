"""Errors asyncio reports that no statement waits for: logged, as asyncio does, not raised.

Why: trio-asyncio's default exception handler raises whatever asyncio's
``call_exception_handler`` reports into the loop's nursery, which ends the whole driver,
and with it the worker pool. asyncpg reports such errors when a connection dies under a
statement nobody awaits any more: a connection terminated on a silent path (the server
gone without a word, so the statement's cancel is never acknowledged and the connection is
terminated, docs/postgres.rst) leaves a protocol future that fails with
``ConnectionError('unexpected connection_lost() call')`` and is never retrieved. Every
statement the driver sends is awaited, and its own failure reaches its caller as a
``BackendError``; a stray report says nothing that caller has not already been told. So
it is logged at warning, as plain asyncio would log it, and the loop goes on.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("trioqueue.postgres")


def log_stray_errors(loop: Any) -> None:
    """Make ``loop`` (a running trio-asyncio loop) log what asyncio reports, not raise it."""
    loop.set_exception_handler(_log_stray_error)


def _log_stray_error(loop: Any, context: dict[str, Any]) -> None:
    message = context.get("message") or "unhandled error in the asyncio loop"
    error = context.get("exception")
    log.warning(
        "asyncio reported an error no statement waits for (logged, not raised): %s%s",
        message,
        "" if error is None else f": {error!r}",
    )
