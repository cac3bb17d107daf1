"""How-to: a synchronous handler, run in a worker thread."""

from __future__ import annotations

import time
from typing import Any

import trio

import trioqueue

REAL_CLOCK = True  # the handler runs in a real thread


def checksum(payload: Any, ctx: trioqueue.JobContext) -> dict[str, Any]:
    """A plain ``def``: it may block, because it runs in a thread of its own."""
    total = 0
    for block in range(payload["blocks"]):
        if ctx.cancel_requested:  # a thread cannot be interrupted: look, and return
            return {"stopped_at": block}
        time.sleep(0.02)  # blocking work: hashing a block of a file, say
        total += block
        ctx.report_progress((block + 1) / payload["blocks"])
    return {"sum": total}


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(
            handler=checksum, queue="files", concurrency=2, max_job_duration=600
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            short = await backend.enqueue("files", {"blocks": 10})
            long = await backend.enqueue("files", {"blocks": 100_000})

            info = await backend.wait_for(short, timeout=30)
            print("short:", info.status, info.result)
            assert info.status == "succeeded"
            assert info.result == {"sum": 45}

            await backend.cancel(long)  # the handler sees ctx.cancel_requested
            info = await backend.wait_for(long, timeout=30)
            print("long:", info.status, "-", info.last_error)
            assert info.status == "failed"
            assert info.last_error is not None
            assert info.last_error.startswith("cancelled")
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
