"""What the conformance suite's topic modules share: the base class, its helpers, the data.

The tests speak only the :class:`~trioqueue._backends.interface.Backend` protocol. Time
passes through ``trio.sleep``: instant under a ``MockClock`` (the memory backend), real but
short against a database, where the few tests that must outlive a lease or a delay wait
``short_timeout + slack`` each.

pytest-trio takes the clock from the test function's own arguments, so every test asks for
the ``clock`` fixture, even when it does not use it.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest
import trio

from trioqueue._backends.interface import Backend
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import (
    Claimed,
    JobInfo,
    Notice,
    NoticeKind,
)
from trioqueue.testing._notices import next_notice

__all__ = ["BAD_OPTIONS", "BAD_PAYLOADS", "WORKER", "ConformanceBase", "Q"]

Q = "conformance"
WORKER = "worker-1"

_cycle: list[Any] = []
_cycle.append(_cycle)

#: Payloads no backend may accept (each must raise TypeError and write nothing).
BAD_PAYLOADS = [
    pytest.param({1, 2}, id="set"),
    pytest.param(object(), id="object"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param(float("nan"), id="nan"),
    pytest.param({"x": [1.0, math.inf]}, id="nested-inf"),
    pytest.param({("tuple", "key"): 1}, id="tuple-key"),
    pytest.param(_cycle, id="circular"),
    pytest.param({"text": "a\x00b"}, id="nul-char"),  # jsonb cannot store U+0000
    pytest.param(["\ud800"], id="lone-surrogate"),  # not valid Unicode
]

#: Enqueue options no backend may accept: ``(overrides, exception type)``.
BAD_OPTIONS = [
    pytest.param({"queue": ""}, ValueError, id="empty-queue"),
    pytest.param({"queue": 7}, TypeError, id="int-queue"),
    pytest.param({"queue": "x" * 129}, ValueError, id="long-queue"),
    pytest.param({"queue": "a\x00b"}, ValueError, id="nul-queue"),
    pytest.param({"priority": "1"}, TypeError, id="str-priority"),
    pytest.param({"priority": True}, TypeError, id="bool-priority"),
    pytest.param({"priority": 1.5}, TypeError, id="float-priority"),
    pytest.param({"delay": -1}, ValueError, id="negative-delay"),
    pytest.param({"delay": math.nan}, ValueError, id="nan-delay"),
    pytest.param({"delay": math.inf}, ValueError, id="inf-delay"),
    pytest.param({"delay": "1"}, TypeError, id="str-delay"),
    pytest.param({"max_attempts": 0}, ValueError, id="zero-max-attempts"),
    pytest.param({"max_attempts": 2.0}, TypeError, id="float-max-attempts"),
    pytest.param({"dedup_key": ""}, ValueError, id="empty-dedup-key"),
    pytest.param({"dedup_key": 5}, TypeError, id="int-dedup-key"),
    # What PostgreSQL's columns cannot hold is refused by every backend alike.
    pytest.param({"priority": 2**31}, ValueError, id="priority-past-int32"),
    pytest.param({"priority": -(2**31) - 1}, ValueError, id="priority-below-int32"),
    pytest.param({"max_attempts": 2**31}, ValueError, id="max-attempts-past-int32"),
    pytest.param({"delay": 1e12}, ValueError, id="delay-past-a-century"),
    pytest.param({"delay": 10**400}, ValueError, id="delay-beyond-float"),
    pytest.param({"queue": "q\udcff"}, ValueError, id="queue-not-utf8-argv"),
    # The unique index on (queue, dedup_key) holds entries of at most 2704 bytes.
    pytest.param({"dedup_key": "k" * 1025}, ValueError, id="dedup-key-past-1024-bytes"),
    pytest.param({"dedup_key": "é" * 513}, ValueError, id="dedup-key-of-513-chars-1026-bytes"),
]


class ConformanceBase:
    """What the topic classes share: the clock fixture, the timings and the helpers.

    A backend's test class subclasses :class:`~trioqueue.testing.BackendConformance`, which
    combines every topic; the class attributes here are what it may tune.
    """

    pytestmark = pytest.mark.trio

    #: A lease or delay short enough to wait out in a test (seconds).
    short_timeout: ClassVar[float] = 0.15
    #: Extra wait past ``short_timeout``, so that it has surely passed on the backend's clock.
    slack: ClassVar[float] = 0.1
    #: A lease that must not expire during a test.
    long_timeout: ClassVar[float] = 60.0
    #: How long a notice may take to arrive.
    notice_timeout: ClassVar[float] = 5.0

    @pytest.fixture
    def clock(self) -> trio.abc.Clock | None:
        """The clock for ``trio.run``: None is trio's real clock."""
        return None

    # -- helpers -------------------------------------------------------------------------

    async def _wait_out(self) -> None:
        """Let ``short_timeout`` pass on the backend's clock."""
        await trio.sleep(self.short_timeout + self.slack)

    async def _claim(
        self,
        backend: Backend,
        *,
        limit: int = 10,
        queue: str = Q,
        worker_id: str = WORKER,
        visibility_timeout: float | None = None,
    ) -> list[Claimed]:
        v = self.long_timeout if visibility_timeout is None else visibility_timeout
        return await backend.claim(queue, limit=limit, worker_id=worker_id, visibility_timeout=v)

    async def _claim_one(
        self, backend: Backend, *, visibility_timeout: float | None = None
    ) -> Claimed:
        claimed = await self._claim(backend, limit=1, visibility_timeout=visibility_timeout)
        assert len(claimed) == 1, claimed
        return claimed[0]

    async def _renew(self, backend: Backend, *items: RenewItem) -> dict[int, Verdict]:
        verdicts = await backend.renew(items, visibility_timeout=self.long_timeout)
        return dict(verdicts)

    @staticmethod
    def _item(claimed: Claimed, progress: float | None = None) -> RenewItem:
        return RenewItem(claimed.job.id, claimed.job.claim_seq, progress)

    @staticmethod
    def _ids(jobs: list[Claimed] | list[JobInfo]) -> list[int]:
        return [j.job.id if isinstance(j, Claimed) else j.id for j in jobs]

    async def _next_notice(
        self, notices: trio.MemoryReceiveChannel[Notice], kind: NoticeKind
    ) -> Notice:
        with trio.fail_after(self.notice_timeout):
            return await next_notice(notices, kind)
