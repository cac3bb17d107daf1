"""Run the asyncio callbacks that are ready in one pass of trio-asyncio's loop.

Why: trio-asyncio's loop takes each asyncio callback through trio's scheduler on its own:
a cancel scope, a channel receive and a scheduler pass per callback. asyncpg makes several
callbacks per statement (its task's steps, the socket's reads, the future's done callback),
so that dance is a large share of the driver's CPU (the issue is known upstream:
python-trio/trio-asyncio#44). asyncio's own loop runs every callback that is ready in one
iteration. :func:`run_ready_callbacks_together` makes trio-asyncio's loop do the same:
after each callback it waited for as usual, it runs the callbacks already queued at that
moment, without a scheduler pass between them; callbacks they queue wait for the next pass,
as in asyncio, so the trio tasks still run between passes. It takes about a fifth off
the worker process's CPU per job in a drain (docs/performance.rst).

It replaces one private method on the loop instance, so it is applied only to the
trio-asyncio versions it was checked against (:data:`CHECKED`), and only when the loop has
what it uses; otherwise the loop is left as it is, and only the speed differs.
"""

from __future__ import annotations

import inspect
import logging
import types
from importlib.metadata import PackageNotFoundError, version
from typing import Any

log = logging.getLogger("trioqueue.postgres")

#: The trio-asyncio releases whose loop this was checked against (major.minor).
CHECKED = ("0.16",)


def run_ready_callbacks_together(loop: Any) -> bool:
    """Make ``loop`` (a running trio-asyncio loop) run its ready callbacks in one pass.

    Returns:
        Whether it was applied (False: an unchecked trio-asyncio, the loop left as it is).
    """
    one: Any = getattr(type(loop), "_main_loop_one", None)
    if not _checked_version() or not _has_what_it_uses(loop, one):
        log.debug("trio-asyncio's loop left as it is: not a release or loop this was checked on")
        return False

    async def one_pass(self: Any, no_wait: bool = False) -> None:
        await one(self, no_wait)  # waits for a callback (or a timer), as before
        # Then every callback that was already queued, as asyncio's loop does per iteration.
        for _ in range(self._q_recv.statistics().current_buffer_used):
            if self._stopped.is_set():
                return
            await one(self, True)  # no wait: takes a queued callback or a due timer

    loop._main_loop_one = types.MethodType(one_pass, loop)
    return True


def _checked_version() -> bool:
    try:
        installed = version("trio-asyncio")
    except PackageNotFoundError:
        return False
    return any(installed == v or installed.startswith(v + ".") for v in CHECKED)


def _has_what_it_uses(loop: Any, one: Any) -> bool:
    if one is None or not hasattr(loop, "_q_recv") or not hasattr(loop, "_stopped"):
        return False
    return "no_wait" in inspect.signature(one).parameters
