"""Retention and the maintainer lease on PostgreSQL (docs/protocol.rst §15).

Contract stubs: the calls are specified in ``trioqueue._backends.interface`` and land with
their SQL (``retention.sql``) and migration.
"""

from __future__ import annotations

from trioqueue._operator_types import MaintainerInfo, PruneBatch, Retention, RetentionPolicy


class RetentionCalls:
    """The PostgresBackend's retention and maintainer calls."""

    async def get_retention(self) -> Retention:
        raise NotImplementedError

    async def set_retention(
        self, queue: str | None, *, succeeded: float | None, failed: float | None
    ) -> RetentionPolicy:
        raise NotImplementedError

    async def clear_retention(self, queue: str) -> bool:
        raise NotImplementedError

    async def set_audit_retention(self, seconds: float | None) -> None:
        raise NotImplementedError

    async def maintainer(self) -> MaintainerInfo | None:
        raise NotImplementedError

    async def claim_maintainer(self, holder: str, lease: float) -> int | None:
        raise NotImplementedError

    async def renew_maintainer(self, holder: str, seq: int, lease: float) -> bool:
        raise NotImplementedError

    async def release_maintainer(self, holder: str, seq: int) -> bool:
        raise NotImplementedError

    async def prune_retained(self, seq: int, *, limit: int = 1000) -> PruneBatch | None:
        raise NotImplementedError
