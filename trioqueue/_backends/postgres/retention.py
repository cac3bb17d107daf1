"""Retention and the maintainer lease on PostgreSQL (docs/protocol.rst §15, migration 0011).

The SQL is ``retention.sql``'s, one statement per call; each call checks its arguments
first (``trioqueue._backends.retention_checks``, shared with the memory backend), so bad
input writes nothing. The lease rules live in the statements themselves: which lease is
live is judged by the database's clock, and every write names the lease's fence (``seq``),
so that a maintainer whose lease moved on can neither extend it nor delete anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.retention_checks import (
    check_audit_retention,
    check_clear_retention,
    check_lease,
    check_preview_age,
    check_prune_limit,
    check_retention,
    check_seq,
)
from trioqueue._backends.validation import check_worker_id
from trioqueue._operator_types import (
    MaintainerInfo,
    PruneBatch,
    Retention,
    RetentionPolicy,
    RetentionPreview,
)

__all__ = ["RetentionCalls"]


class RetentionCalls(BackendBase):
    """The PostgresBackend's retention and maintainer calls."""

    async def get_retention(self) -> Retention:
        """Every retention setting: the default policy, the queues' own, the audit log's."""
        rows = await self._driver.run("get_retention", _fetch, self._sql["get_retention"])
        settings, *own = rows
        return Retention(
            default=RetentionPolicy(None, settings["succeeded"], settings["failed"]),
            queues=tuple(RetentionPolicy(r["queue"], r["succeeded"], r["failed"]) for r in own),
            audit=settings["audit"],
        )

    async def set_retention(
        self, queue: str | None, *, succeeded: float | None, failed: float | None
    ) -> RetentionPolicy:
        """Set how long ``queue``'s finished jobs are kept (None: the default policy).

        Raises:
            TypeError, ValueError: naming every bad argument; nothing is written.
        """
        r = check_retention(queue, succeeded, failed)
        await self._driver.run(
            "set_retention", _fetchval, self._sql["set_retention"], r.queue, r.succeeded, r.failed
        )
        return RetentionPolicy(r.queue, r.succeeded, r.failed)

    async def clear_retention(self, queue: str) -> bool:
        """Drop ``queue``'s own policy; False if it had none."""
        name = check_clear_retention(queue)
        found = await self._driver.run(
            "clear_retention", _fetchval, self._sql["clear_retention"], name
        )
        return found is not None

    async def set_audit_retention(self, seconds: float | None) -> None:
        """Keep audit entries ``seconds`` (> 0), or for ever (None)."""
        keep = check_audit_retention(seconds)
        await self._driver.run(
            "set_audit_retention", _fetchval, self._sql["set_audit_retention"], keep
        )

    async def maintainer(self) -> MaintainerInfo | None:
        """The maintainer lease as it stands (None: never taken)."""
        row = await self._driver.run("maintainer", _fetchrow, self._sql["maintainer"])
        if row is None:
            return None
        return MaintainerInfo(
            holder=row["holder"],
            seq=row["seq"],
            acquired_at=row["acquired_at"],
            expires_at=row["not_visible_until"],
        )

    async def claim_maintainer(self, holder: str, lease: float) -> int | None:
        """Take the maintainer lease if it is free or ran out; its new fence, or None."""
        name, seconds = check_lease(holder, lease)
        seq: int | None = await self._driver.run(
            "claim_maintainer", _fetchval, self._sql["claim_maintainer"], name, seconds
        )
        return seq

    async def renew_maintainer(self, holder: str, seq: int, lease: float) -> bool:
        """Extend the maintainer lease, fenced by ``seq``."""
        name, seconds = check_lease(holder, lease)
        fence = check_seq(seq)
        done = await self._driver.run(
            "renew_maintainer", _fetchval, self._sql["renew_maintainer"], name, fence, seconds
        )
        return done is not None

    async def release_maintainer(self, holder: str, seq: int) -> bool:
        """Give the maintainer lease up, fenced by ``seq``."""
        name = check_worker_id(holder)
        fence = check_seq(seq)
        done = await self._driver.run(
            "release_maintainer", _fetchval, self._sql["release_maintainer"], name, fence
        )
        return done is not None

    async def prune_retained(self, seq: int, *, limit: int = 1000) -> PruneBatch | None:
        """One bounded batch of retention, fenced by the maintainer lease ``seq``."""
        fence = check_seq(seq)
        size = check_prune_limit(limit)
        row = await self._driver.run(
            "prune_retained", _batch, self._sql["prune_retained"], fence, size
        )
        return None if not row["fenced"] else prune_batch(row)

    async def retention_preview(self, *, older_than: float | None = None) -> RetentionPreview:
        """What a prune would delete now (by the policies, or by age), counted."""
        age = check_preview_age(older_than)
        row = await self._driver.run(
            "retention_preview", _fetchrow, self._sql["retention_preview"], age
        )
        kinds = zip(row["queues"] or (), row["statuses"] or (), row["counts"] or (), strict=True)
        return RetentionPreview(
            due={(queue, status): int(n) for queue, status, n in kinds},
            audit_due=int(row["audit_due"]),
        )


def prune_batch(row: Mapping[str, Any]) -> PruneBatch:
    """A ``prune_retained`` row as a :class:`PruneBatch`: its three parallel arrays (queue,
    status, count; NULL when nothing was deleted) become the per-kind counts."""
    kinds = zip(row["queues"] or (), row["statuses"] or (), row["counts"] or (), strict=True)
    return PruneBatch(
        deleted={(queue, status): int(n) for queue, status, n in kinds},
        audit_deleted=int(row["audit_deleted"]),
        more=bool(row["more"]),
        oldest_finished_age=row["oldest_finished_age"],
    )


#: What a batch's transaction sets first (retention.sql says why).
BATCH_SETTINGS = "SET LOCAL jit = off; SET LOCAL enable_bitmapscan = off"


async def _batch(connection: Any, query: str, *args: Any) -> Any:
    """The batch statement in a transaction of its own with jit and bitmap scans off
    (retention.sql says why): one crossing, three round trips (BEGIN and SET, the batch,
    COMMIT)."""
    async with connection.transaction():
        await connection.execute(BATCH_SETTINGS)
        return await connection.fetchrow(query, *args)


async def _fetch(connection: Any, query: str, *args: Any) -> list[Any]:
    rows: list[Any] = await connection.fetch(query, *args)
    return rows


async def _fetchrow(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchrow(query, *args)


async def _fetchval(connection: Any, query: str, *args: Any) -> Any:
    return await connection.fetchval(query, *args)
