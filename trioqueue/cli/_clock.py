"""The database's clock, for the lease expiries the command line prints ("in 25s"): a
lease runs by the database's clock (docs/protocol.rst §15), so its time left is counted
from the database's now, not this machine's, which may be off (docs/cli.rst).

The backend answers its clock (``database_clock()``, one cheap statement) and this
process's reading of the same clock (``wall_time()``, no I/O), in the seconds row times
use; the database's now is this machine's now moved by their difference.
"""

from __future__ import annotations

import datetime

import trioqueue

__all__ = ["database_now", "local_now"]


async def database_now(
    backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
) -> datetime.datetime:
    """The database's clock now, as an aware datetime."""
    ahead = await backend.database_clock() - backend.wall_time()
    return local_now() + datetime.timedelta(seconds=ahead)


def local_now() -> datetime.datetime:
    """This machine's clock (a seam: a test moves it to skew it from the database's)."""
    return datetime.datetime.now(datetime.UTC)
