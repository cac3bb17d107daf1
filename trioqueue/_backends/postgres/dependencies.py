"""The PostgreSQL backend's read of a job's dependency edges (docs/protocol.rst §21).

The writes live elsewhere: ``enqueue_after`` (producers.py) writes the edges, and the
triggers of migration 0018 wake or fail dependents from whatever statement finishes a job.
"""

from __future__ import annotations

from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.reads import known_bigint
from trioqueue._backends.postgres.statements import fetch
from trioqueue._errors import UnknownJobError
from trioqueue._types import DependencyInfo, JobDependencies


class DependencyCalls(BackendBase):
    """Reading dependency edges."""

    async def dependencies(self, job_id: int) -> JobDependencies:
        """The job's dependencies and dependents, each with its queue and current state.

        Read on the primary (a replica's edges could lag behind the job it just found);
        ``UnknownJobError`` for an unknown id, ``TypeError`` for one that is not an int.
        """
        await known_bigint(job_id)
        rows = await self._driver.run("dependencies", fetch, self._sql["job_dependencies"], job_id)
        if not any(row["side"] == "self" for row in rows):
            raise UnknownJobError(job_id)
        sides: dict[str, list[DependencyInfo]] = {
            "dependency": [], "dependent": [], "parent": [], "child": []
        }  # fmt: skip
        for row in rows:
            if row["side"] != "self":
                sides[row["side"]].append(DependencyInfo(row["id"], row["queue"], row["state"]))

        def by_id(side: str) -> tuple[DependencyInfo, ...]:
            return tuple(sorted(sides[side], key=lambda d: d.id))

        parent = sides["parent"]
        return JobDependencies(
            job_id,
            by_id("dependency"),
            by_id("dependent"),
            parent[0] if parent else None,
            by_id("child"),  # ids ascend in enqueue order
        )
