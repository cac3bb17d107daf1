"""How-to: cancel a job, and what its handler sees."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue

seen: list[str] = []  # what the handler saw, for the example's own check


async def transcode(payload: Any, ctx: trioqueue.JobContext) -> None:
    try:
        for _ in range(1000):
            await trio.sleep(1)  # every await is a checkpoint: a cancel lands here
    except trio.Cancelled:
        seen.append(f"Cancelled, cancel_requested={ctx.cancel_requested}")
        # Clean up under a shield, bounded: the job keeps its lease meanwhile.
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await remove_partial_output(payload)
        raise  # always re-raise Cancelled


async def remove_partial_output(payload: Any) -> None:
    await trio.sleep(0.5)  # stands in for real cleanup


async def main() -> None:
    claimed = trio.Event()

    async def on_job_claimed(job: trioqueue.Job) -> None:
        claimed.set()

    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(
            handler=transcode,
            on_job_claimed=on_job_claimed,
            queue="video",
            max_job_duration=3600,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            running = await backend.enqueue("video", {"file": "a.mov"})
            await claimed.wait()
            await trio.sleep(10)  # the handler is at work now

            assert await backend.cancel(running)  # True: the job was not finished
            info = await backend.wait_for(running, timeout=60)
            print(info.status, "-", info.last_error)  # failed - cancelled: ...
            print("the handler saw:", seen)
            assert info.status == "failed"
            assert info.last_error is not None
            assert info.last_error.startswith("cancelled")
            assert seen == ["Cancelled, cancel_requested=True"]

            # A job that has not started fails at once; its handler never runs.
            waiting = await backend.enqueue("video", {"file": "b.mov"}, delay=600)
            assert await backend.cancel(waiting)
            assert (await backend.get_job(waiting)).status == "failed"
            # A finished job cannot be cancelled.
            assert not await backend.cancel(running)
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
