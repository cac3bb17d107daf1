"""A pool cancelled while its services start (docs/usage.rst, "Shutting down"): it stops,
however far its start had gone.

A pool's services (guard, outcome writer, listener) run shielded until the pool stops, so
that they outlive a cancel through the graceful shutdown. Cancelled before they had all
started, the pool must still reach its shutdown; it once waited for ever instead (trio's
``nursery.start``, cancelled first, neither hands the started task on nor returns). A pool
that waits for ever cannot be cancelled (it is shielded), so the scenario runs in a
process of its own, which the test gives a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = textwrap.dedent(
    """
    from contextlib import asynccontextmanager

    import trio
    import trio.testing

    import trioqueue

    async def main():
        backend = trioqueue.MemoryBackend()
        entered, go = trio.Event(), trio.Event()
        real_listen = backend.listen

        @asynccontextmanager
        async def slow_listen(queue, worker_id):
            entered.set()
            await go.wait()  # the LISTEN connection being made, on a slow database
            async with real_listen(queue, worker_id) as notices:
                yield notices

        backend.listen = slow_listen

        async def noop(payload, ctx):
            pass

        config = trioqueue.WorkerConfig(handler=noop, queue="q", max_job_duration=10)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trioqueue.run_worker_pool, backend, config)
            await entered.wait()
            nursery.cancel_scope.cancel()  # while the listener starts, shielded
            go.set()
        assert await backend.list_workers() == [], "the pool did not unregister"
        print("stopped")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    """
)


def test_a_pool_cancelled_while_its_listener_starts_stops() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO], env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "stopped\n"), done.stderr
