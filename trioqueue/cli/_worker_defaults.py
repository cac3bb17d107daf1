"""What ``trioqueue worker`` uses for a pool option not given, and how its help says so.

Every option but ``--concurrency`` keeps :class:`trioqueue.WorkerConfig`'s own default, and
``worker --help`` shows it, read from the dataclass so that the two cannot drift apart.

``--concurrency`` defaults to 10 for an ``async def`` handler, where WorkerConfig says 1. One
batch at a time surprised operators: an async handler mostly waits on I/O, and ten at once
cost little more than one (a claim of up to ``batch_size`` jobs each, and a connection each
only with ``--transactional``). A plain ``def`` handler keeps 1: it runs in a worker thread,
and whether it is safe to run beside itself is for its author to say. WorkerConfig's own
default stays 1, as pinned in the API: a program that builds its configs itself chose its
numbers already, and a changed library default would change every such program silently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trioqueue
from trioqueue._runtime.config import is_async_callable

__all__ = ["ASYNC_CONCURRENCY", "CONCURRENCY_HELP", "default_concurrency", "default_help"]

#: ``--concurrency`` when not given, for a pool of an async handler.
ASYNC_CONCURRENCY = 10

CONCURRENCY_HELP = (
    f"batches handled at once (default: {ASYNC_CONCURRENCY} for an async handler, "
    "1 for a plain def one, which runs in a thread)"
)


def default_concurrency(handler: Callable[..., Any]) -> int:
    """The concurrency of a pool of ``handler`` when ``--concurrency`` is not given."""
    if is_async_callable(handler):
        return ASYNC_CONCURRENCY
    default: int = _field_default("concurrency")
    return default


def default_help(field: str, meaning: str) -> str:
    """``meaning`` and WorkerConfig's default for ``field``: ``lease length (default: 60)``."""
    return f"{meaning} (default: {_shown(_field_default(field))})"


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return f"{value:g}"
    return str(value)


def _field_default(name: str) -> Any:
    return trioqueue.WorkerConfig.__dataclass_fields__[name].default
