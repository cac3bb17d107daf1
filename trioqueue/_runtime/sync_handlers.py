"""Sync handlers: a plain ``def`` handler runs in a worker thread (docs/usage.rst).

A thread cannot be cancelled, so a task beside it flags ``ctx.cancel_requested`` when the
job's scope is stopped, for the handler to see; and what the handler returns is checked in
its thread, where a coroutine or generator it returned (work never done) fails the attempt
rather than passing for a success. The handler's error is returned rather than raised, so
that it reaches the attempt as itself, not wrapped in the nursery's exception group; so is a
``Snooze`` it returned, which the attempt then raises as if the handler had (docs/protocol.rst
§17).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import trio

from trioqueue._backends.validation import encode_result
from trioqueue._core.snooze import Snooze
from trioqueue._runtime.context import JobContext

__all__ = ["call_sync_handler", "tell_thread_when_stopped"]


async def tell_thread_when_stopped(ctx: JobContext) -> None:
    """A thread cannot be cancelled: flag ``ctx.cancel_requested`` when the scope is."""
    try:
        await trio.sleep_forever()
    finally:
        ctx._mark_stop_seen()


def call_sync_handler(
    handler: Callable[[Any, JobContext], object], payload: Any, ctx: JobContext
) -> tuple[str | None, Exception | None]:
    """Call a sync handler, in its thread, and refuse a result that is work not done;
    its return value as JSON text (encoded in the thread, off the trio loop), or the
    error it raised."""
    try:
        result = handler(payload, ctx)
        if isinstance(result, Snooze):
            return None, result  # returning one is raising one
        _refuse_unrun_work(result)
        return encode_result(result), None
    except Exception as exc:
        return None, exc


def _refuse_unrun_work(result: object) -> None:
    """A sync handler's result that is work not done: a coroutine (``lambda p, ctx:
    do(p)`` of an ``async def do``), or a generator. Succeeding would drop the work, so the
    attempt fails, naming the fix; the object is closed, so no "never awaited" warning
    follows it.

    Raises:
        TypeError: ``result`` is such an object.
    """
    if inspect.isawaitable(result):
        _close(result)
        raise TypeError(
            f"handler returned {_kind_of(result)} instead of running it: declare the "
            "handler `async def` and await it there (a sync handler runs in a thread)"
        )
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        _close(result)
        raise TypeError(
            f"handler returned {_kind_of(result)}, so none of its work ran: a handler "
            "must not yield"
        )


def _kind_of(result: object) -> str:
    if inspect.iscoroutine(result):
        return "a coroutine"
    if inspect.isasyncgen(result):
        return "an async generator"
    if inspect.isgenerator(result):
        return "a generator"
    return f"an awaitable ({type(result).__name__})"


def _close(result: object) -> None:
    """Close a coroutine or generator that never ran, so that it warns of nothing (an
    async generator that never started holds nothing to close)."""
    if inspect.iscoroutine(result) or inspect.isgenerator(result):
        result.close()
