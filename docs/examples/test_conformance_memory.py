"""The conformance suite, run against the memory backend: a backend's test module
subclasses ``BackendConformance`` and provides a ``backend`` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio.testing

import trioqueue
from trioqueue.testing import BackendConformance


class TestMemoryBackend(BackendConformance):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[trioqueue.MemoryBackend]:
        async with trioqueue.open_memory() as backend:
            yield backend

    @pytest.fixture
    def clock(self) -> trio.testing.MockClock:
        # Its times come from trio, so the suite's leases can run on a fake clock.
        return trio.testing.MockClock(autojump_threshold=0)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
