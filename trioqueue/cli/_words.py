"""The command line's words for states, in one place so that every message says them alike.

A job's state reads as a phrase: it *is* scheduled, ready or running, and it *has*
succeeded or failed (``job 2 has succeeded``, never ``job 2 is succeeded``). A worker pool
is ``live`` or ``stale`` (``status``; the dashboard uses the same two words), and its clock
is flagged ``ahead`` or ``claims stopped`` as the dashboard's workers page flags it
(docs/protocol.rst §8).
"""

from __future__ import annotations

__all__ = ["CLOCK_FLAGS", "LIVE", "STALE", "job_is"]

#: A worker pool that beat within three heartbeat intervals, and one that did not.
LIVE = "live"
STALE = "stale"

#: A pool's clock verdict as shown: none for ``in_sync``; ``ahead`` past the safe margin,
#: ``claims stopped`` past V - H (the pool claims nothing until the clocks agree).
CLOCK_FLAGS = {"in_sync": "", "ahead": "ahead", "stopped": "claims stopped"}

#: The finished states, which take "has" (``has succeeded``).
_FINISHED = frozenset({"succeeded", "failed"})


def job_is(status: str, *, already: bool = False) -> str:
    """``is ready``, ``has succeeded``; with ``already``: ``is already running``, ``has
    already failed``."""
    verb = "has" if status in _FINISHED else "is"
    return f"{verb} {'already ' if already else ''}{status}"
