"""Worker pools of one process on one backend and queue: one claim per work notice.

Every pool listens, so a work notice reaches every pool of the process on its queue, and
each would claim: with five pools, five claim statements for one enqueued job, four of
which find nothing and only slow down the one that matters (and the producer's enqueue).

Sibling pools share a count of the claims they have begun. A pool woken by a work notice
passes it over when a sibling began a claim after the notice arrived: a notice is
delivered only once its transaction has committed, so that claim's snapshot holds the
notice's jobs, and it took them all unless it came back full. A claim that comes back full
(there may be more work) or fails wakes the sibling pools, so a large enqueue still spreads
over every pool, and nothing waits for the poll interval that would not have anyway
(docs/usage.rst, "When a pool claims").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import trio

Wake = Callable[[], None]


class Siblings:
    """The pools of this trio run that claim from one backend object's queue."""

    def __init__(self) -> None:
        self.claims_begun = 0
        self._wakes: list[Wake] = []

    def begin_claim(self) -> None:
        """A pool has decided to claim, and its statement goes out at once."""
        self.claims_begun += 1

    def claimed_since(self, mark: int) -> bool:
        """Whether a claim began after ``claims_begun`` read ``mark``."""
        return self.claims_begun > mark

    def wake_others(self, wake: Wake) -> None:
        """Wake every sibling pool but the caller (whose own ``wake`` this is)."""
        for other in self._wakes:
            if other is not wake:
                other()


_SIBLINGS: trio.lowlevel.RunVar[dict[tuple[int, str], Siblings]] = trio.lowlevel.RunVar(
    "trioqueue.siblings"
)


@contextmanager
def siblings_of(backend: object, queue: str, wake: Wake) -> Iterator[Siblings]:
    """Join the pools of this run on ``backend``'s ``queue`` for the block; ``wake`` is how
    they wake this pool."""
    try:
        table = _SIBLINGS.get()
    except LookupError:
        table = {}
        _SIBLINGS.set(table)
    key = (id(backend), queue)  # the backend outlives its pools: the id stays its own
    group = table.setdefault(key, Siblings())
    group._wakes.append(wake)
    try:
        yield group
    finally:
        group._wakes.remove(wake)
        if not group._wakes:
            del table[key]
