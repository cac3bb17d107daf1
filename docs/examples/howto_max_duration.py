"""How-to: bound how long a job may run with max_job_duration."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue


async def fetch_feed(payload: Any, ctx: trioqueue.JobContext) -> None:
    await trio.sleep_forever()  # a call that hangs: no answer, no timeout of its own


async def on_job_retry(job: trioqueue.Job, delay: float) -> None:
    print(f"job {job.id} attempt {job.attempt} ran too long; retry in {delay:.1f}s")


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(
            handler=fetch_feed,
            queue="feeds",
            max_job_duration=120,  # claim hooks and handler, per attempt
            on_job_retry=on_job_retry,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            job_id = await backend.enqueue("feeds", {"url": "..."}, max_attempts=2)
            info = await backend.wait_for(job_id, timeout=3600)
            print(info.status, info.attempts, "-", info.last_error)
            assert info.status == "failed"
            assert info.attempts == 2
            assert info.last_error is not None
            assert "max_job_duration" in info.last_error
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
