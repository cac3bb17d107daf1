"""The reference model's retention tables (docs/protocol.rst §15, migration 0011): the
policies, the audit log's keep-time and the maintainer lease row, with the rules that read
them. :class:`~trioqueue._backends.memory.model.MemoryModel` owns one of each and mirrors
``retention.sql``'s named queries with them; this module holds no rows of jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trioqueue._operator_types import (
    DEFAULT_KEEP_AUDIT,
    DEFAULT_KEEP_FAILED,
    DEFAULT_KEEP_SUCCEEDED,
    Retention,
    RetentionPolicy,
)

__all__ = ["LeaseRow", "Policies"]


@dataclass(slots=True)
class Policies:
    """The tables ``retention`` (a queue's own policy) and ``retention_settings`` (the
    default and the audit log's keep-time), in seconds; None keeps for ever."""

    default_succeeded: float | None = DEFAULT_KEEP_SUCCEEDED
    default_failed: float | None = DEFAULT_KEEP_FAILED
    audit: float | None = DEFAULT_KEEP_AUDIT
    queues: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def keep(self, queue: str, status: str) -> float | None:
        """How long a ``status`` ("succeeded" or "failed") job of ``queue`` is kept: the
        queue's own policy, whole, when it has one (its None keeps for ever, it does not
        fall back to the default), else the default."""
        succeeded, failed = self.queues.get(queue, (self.default_succeeded, self.default_failed))
        return succeeded if status == "succeeded" else failed

    def policy(self, queue: str | None) -> RetentionPolicy:
        if queue is None:
            return RetentionPolicy(None, self.default_succeeded, self.default_failed)
        succeeded, failed = self.queues[queue]
        return RetentionPolicy(queue, succeeded, failed)

    def retention(self) -> Retention:
        return Retention(
            default=self.policy(None),
            queues=tuple(self.policy(queue) for queue in sorted(self.queues)),
            audit=self.audit,
        )


@dataclass(slots=True)
class LeaseRow:
    """The ``maintainer`` singleton once taken (model times). A lease is live while
    ``not_visible_until > now``, as a job's lease is (docs/protocol.rst §1)."""

    holder: str
    seq: int
    acquired_at: float
    not_visible_until: float

    def live(self, now: float) -> bool:
        return self.not_visible_until > now

    def held(self, holder: str, seq: int, now: float) -> bool:
        """``holder``'s lease of fence ``seq`` is the live one: a renewal or a release
        of it may write."""
        return self.holder == holder and self.seq == seq and self.live(now)
