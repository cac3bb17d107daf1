"""The database's clock, for the times the dashboard counts down or up (docs/dashboard.rst,
"Clocks"): a lease's expiry and a heartbeat's age are the database's timestamps, so "in
25s" is computed from the database's now, not this machine's, which may be off.

The backend answers its clock (``database_clock()``, one cheap statement) and this
process's reading of the same clock (``wall_time()``, no I/O), both in the seconds row
times use; their difference is how far the database's clock is ahead of this machine's,
and the database's now is this machine's now moved by it. A page carries that now
(``data-db-now``), so the browser, which ticks the countdowns, does so on the database's
clock too, whatever its own says.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import trioqueue

__all__ = ["database_now"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


async def database_now(backend: Backend) -> datetime:
    """The database's clock now, as an aware datetime."""
    ahead = await backend.database_clock() - backend.wall_time()
    return local_now() + timedelta(seconds=ahead)


def local_now() -> datetime:
    """This machine's clock (a seam: a test moves it to skew it from the database's)."""
    return datetime.now(UTC)
