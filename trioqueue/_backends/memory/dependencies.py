"""The dependency edges of the reference model (docs/protocol.rst §21): the ``job_edges``
table, and the walk that finds which waiting dependents a failure reaches.

The rows' own columns (``waiting``, ``has_dependents``, ``dependency_failure``) live on
:class:`~trioqueue._backends.memory.model.Row`; :class:`~trioqueue._backends.memory.model.
MemoryModel` writes them as migration 0018's triggers do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["Edges", "failure_message"]


class Edges:
    """``job_edges``: who depends on whom, both ways (its primary key and its index)."""

    def __init__(self) -> None:
        self._dependents: dict[int, set[int]] = {}
        self._dependencies: dict[int, set[int]] = {}

    def __len__(self) -> int:
        """The number of edges (the table's row count, for ``table_health``)."""
        return sum(len(dependents) for dependents in self._dependents.values())

    def add(self, dependency_ids: Iterable[int], dependent_id: int) -> None:
        for dependency_id in dependency_ids:
            self._dependents.setdefault(dependency_id, set()).add(dependent_id)
            self._dependencies.setdefault(dependent_id, set()).add(dependency_id)

    def dependents_of(self, job_id: int) -> list[int]:
        return sorted(self._dependents.get(job_id, ()))

    def dependencies_of(self, job_id: int) -> list[int]:
        return sorted(self._dependencies.get(job_id, ()))

    def forget_dependency(self, job_id: int) -> None:
        """Delete the edges whose dependency is ``job_id`` (it was deleted)."""
        for dependent_id in self._dependents.pop(job_id, ()):
            dependencies = self._dependencies.get(dependent_id)
            if dependencies is not None:
                dependencies.discard(job_id)
                if not dependencies:
                    del self._dependencies[dependent_id]

    def nearest(self, root: int, waiting: Callable[[int], bool]) -> dict[int, int]:
        """Every waiting job reachable from ``root`` through waiting jobs, each with the
        dependency it is first reached through (``fail_dependents``' ``reach`` and
        ``nearest``: the fewest steps, then the lowest id)."""
        found: dict[int, int] = {}
        level = [root]
        while level:
            reached: dict[int, int] = {}
            for via in sorted(level):
                for job_id in self._dependents.get(via, ()):
                    if job_id not in found and job_id not in reached and waiting(job_id):
                        reached[job_id] = via
            found.update(reached)
            level = list(reached)
        return found


def failure_message(policy: str | None, via: int, root: int, reason: str) -> str:
    """``last_error`` of a dependent a dependency's failure reached (``fail_dependents``)."""
    what = reason if via == root else "failed"
    prefix = "cancelled: " if policy == "cancel" else ""
    return f"{prefix}dependency {via} {what}"
