"""The outcome writer: one statement per kind for every outcome that is ready together.

Jobs of a batch often finish in the same scheduling round, and many batches finish close
together under load. Each settle task hands its fenced write to the writer and waits; the
writer sends everything queued meanwhile as one ``ack``, one ``fail`` and one ``release``
call. Under load that turns N round trips into a few, which is what keeps the PostgreSQL
backend's bridge crossings off the per-job path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from trioqueue._backends.interface import Backend
from trioqueue._errors import BackendError
from trioqueue._types import Ack, Failure, Recorded, Release

Write = Ack | Failure | Release
#: Per item: applied or not (acks, releases); for a failure, what it became, or None.
Result = bool | Recorded | None


@dataclass(eq=False)
class _Pending:
    item: Write
    done: trio.Event = field(default_factory=trio.Event)
    result: Result = None
    error: BaseException | None = None


class OutcomeWriter:
    """Batches fenced outcome writes of one pool."""

    def __init__(self, backend: Backend, statement_timeout: float) -> None:
        self._backend = backend
        self._timeout = statement_timeout
        self._queue: list[_Pending] = []
        self._wake = trio.Event()

    @property
    def backend(self) -> Backend:
        """The backend written to (batches open transactions on it in transactional mode)."""
        return self._backend

    async def write(self, item: Write) -> Result:
        """Write ``item`` with whatever else is ready: for an ack or a release, True if the
        fence let it through; for a failure, what it was recorded as (None: fenced out).

        Raises:
            Exception: whatever the backend raised for the statement that carried it.
        """
        pending = _Pending(item)
        self._queue.append(pending)
        self._wake.set()
        await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            batch, self._queue = self._queue, []
            for kind in (Ack, Failure, Release):
                group = [p for p in batch if type(p.item) is kind]
                if group:
                    await self._send(group)

    async def _send(self, group: list[_Pending]) -> None:
        try:
            with trio.fail_after(self._timeout):
                results = await self._call(group)
        except trio.TooSlowError:
            error: BaseException = BackendError(f"outcome write timed out after {self._timeout:g}s")
            for pending in group:
                pending.error = error
        except Exception as exc:
            for pending in group:
                pending.error = exc
        else:
            for pending, result in zip(group, results, strict=True):
                pending.result = result
        finally:
            for pending in group:
                pending.done.set()

    async def _call(self, group: list[_Pending]) -> Sequence[Result]:
        first = group[0].item
        if isinstance(first, Ack):
            return await self._backend.ack([p.item for p in group if isinstance(p.item, Ack)])
        if isinstance(first, Failure):
            return await self._backend.fail([p.item for p in group if isinstance(p.item, Failure)])
        return await self._backend.release([p.item for p in group if isinstance(p.item, Release)])
