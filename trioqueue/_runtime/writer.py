"""The outcome writer: one statement per kind for every outcome that is ready together.

Jobs of a batch often finish in the same scheduling round, and many batches finish close
together under load. A batch hands the fenced writes of every job that finished since its
last hand-over to the writer in one call, and waits once; the writer sends everything
queued meanwhile, from every batch, as one ``ack``, one ``fail``, one ``release`` and one
``snooze`` call.
Under load that turns N round trips into a few, which is what keeps the PostgreSQL
backend's bridge crossings off the per-job path, and one wait per batch (not per job) keeps
the runtime's own cost off it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import trio

from trioqueue._backends.interface import Backend
from trioqueue._core.snooze import DEFAULT_MAX_SNOOZES
from trioqueue._errors import BackendError
from trioqueue._types import Ack, Failure, Recorded, Release, Snoozed, SnoozeWrite

Write = Ack | Failure | Release | SnoozeWrite
#: Per item: applied or not (acks, releases); for a failure or a snooze, what it became, or
#: None.
Result = bool | Recorded | Snoozed | None

#: Stands in for the answer to an item the writer never sent (only when it is stopped).
_NOT_SENT = BackendError("the outcome writer stopped before sending this outcome")


class _Pending:
    """One hand-over: its items, and per item the backend's answer or the error."""

    __slots__ = ("done", "items", "results")

    def __init__(self, items: Sequence[Write]) -> None:
        self.items = items
        self.results: list[Result | Exception] = [_NOT_SENT] * len(items)
        self.done = trio.Event()


class OutcomeWriter:
    """Batches fenced outcome writes of one pool."""

    def __init__(
        self, backend: Backend, statement_timeout: float, max_snoozes: int = DEFAULT_MAX_SNOOZES
    ) -> None:
        self._backend = backend
        self._timeout = statement_timeout
        self._max_snoozes = max_snoozes  # the pool's bound, sent with every snooze (§17)
        self._queue: list[_Pending] = []
        self._wake = trio.Event()

    @property
    def backend(self) -> Backend:
        """The backend written to (batches open transactions on it in transactional mode)."""
        return self._backend

    async def write(self, items: Sequence[Write]) -> list[Result | Exception]:
        """Write ``items`` with whatever else is ready.

        Returns:
            Per item: for an ack or a release, True if the fence let it through; for a
            failure or a snooze, what it was recorded as (None: fenced out); or the
            exception the backend raised for the statement that carried it.
        """
        pending = _Pending(items)
        self._queue.append(pending)
        self._wake.set()
        await pending.done.wait()
        return pending.results

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            batch, self._queue = self._queue, []
            # Per kind: the items, and where each one's answer goes (its hand-over, its index).
            groups: dict[type, tuple[list[Write], list[tuple[_Pending, int]]]] = {
                Ack: ([], []),
                Failure: ([], []),
                Release: ([], []),
                SnoozeWrite: ([], []),
            }
            for pending in batch:
                for index, item in enumerate(pending.items):
                    items, slots = groups[type(item)]
                    items.append(item)
                    slots.append((pending, index))
            try:
                for items, slots in groups.values():
                    if items:
                        await self._send(items, slots)
            finally:
                for pending in batch:
                    pending.done.set()

    async def _send(self, items: list[Write], group: list[tuple[_Pending, int]]) -> None:
        """One statement for ``items`` (of one kind); each one's answer or error, to the
        place ``group`` names."""
        try:
            with trio.fail_after(self._timeout):
                results = await self._call(items)
        except trio.TooSlowError:
            error: Exception = BackendError(f"outcome write timed out after {self._timeout:g}s")
            for pending, index in group:
                pending.results[index] = error
        except Exception as exc:
            for pending, index in group:
                pending.results[index] = exc
        else:
            for (pending, index), result in zip(group, results, strict=True):
                pending.results[index] = result
            if type(items[0]) is not Ack:  # acks, the hot path, are told to nobody
                self._recorded(items, results)

    def _recorded(self, items: Sequence[Write], results: Sequence[Result]) -> None:
        """Written: ``items`` (of one kind, never acks) and the backend's answers. The
        pool's writer hears of retries and snoozes here (pool.py); this one, of nothing."""

    async def _call(self, items: list[Write]) -> Sequence[Result]:
        """The statement for ``items``, all of one kind (``run`` grouped them by type)."""
        first = items[0]
        if isinstance(first, Ack):
            return await self._backend.ack(cast(list[Ack], items))
        if isinstance(first, Failure):
            return await self._backend.fail(cast(list[Failure], items))
        if isinstance(first, SnoozeWrite):
            snoozes = cast(list[SnoozeWrite], items)
            return await self._backend.snooze(snoozes, max_snoozes=self._max_snoozes)
        return await self._backend.release(cast(list[Release], items))
