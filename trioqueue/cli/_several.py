"""Several backends read as one, for what watches a worker process whose queues are spread
over several databases: its health checks (the pool registry, ``trioqueue/cli/_health.py``)
and its metrics' gauges (``trioqueue.metrics``).

Each backend is asked about the queues this process serves on it, so a queue's numbers come
from its own database alone (a queue name is given once in the process,
``trioqueue.run_workers``). A read fails as a whole when one database does not answer:
readiness then says the database is unreachable, and the gauges keep their last sample,
as they do for one database.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

import trio

import trioqueue

__all__ = ["SeveralBackends"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend
T = TypeVar("T")


class SeveralBackends:
    """The backends of one process, each with the queues it serves there."""

    def __init__(self, served: Mapping[Backend, Sequence[str]]) -> None:
        self.served = {backend: tuple(queues) for backend, queues in served.items()}

    async def list_workers(self) -> list[trioqueue.WorkerInfo]:
        """The pools of every backend's registry that are of this process's queues there."""
        found: list[trioqueue.WorkerInfo] = []
        for backend, queues in await self._each(lambda b: b.list_workers()):
            found.extend(info for info in queues if info.queue in self.served[backend])
        return found

    async def queue_stats(self) -> dict[str, trioqueue.QueueStats]:
        """Each served queue's stats, read from its own database."""
        stats: dict[str, trioqueue.QueueStats] = {}
        for backend, per_queue in await self._each(lambda b: b.queue_stats()):
            for queue in self.served[backend]:
                if queue in per_queue:
                    stats[queue] = per_queue[queue]
        return stats

    def statistics(self) -> trioqueue.BackendStatistics:
        """The connections of every backend, summed (calls too)."""
        every = [backend.statistics() for backend in self.served]
        calls: collections.Counter[str] = collections.Counter()
        for statistics in every:
            calls.update(statistics.calls)
        return trioqueue.BackendStatistics(
            connections_in_use=sum(s.connections_in_use for s in every),
            peak_connections_in_use=sum(s.peak_connections_in_use for s in every),
            calls=dict(calls),
        )

    async def _each(self, read: Callable[[Backend], Awaitable[T]]) -> list[tuple[Backend, T]]:
        """``read`` of every backend at once (one slow database does not add its wait to
        the others'); the first failure is raised."""
        results: dict[int, tuple[Backend, T]] = {}

        async def one(index: int, backend: Backend) -> None:
            results[index] = (backend, await read(backend))

        async with trio.open_nursery() as nursery:
            for index, backend in enumerate(self.served):
                nursery.start_soon(one, index, backend)
        return [results[index] for index in sorted(results)]
