"""Cancel a job, waiting or running (docs/usage.rst, "Cancel a job")."""

import trio

import trioqueue


async def main() -> None:
    started = trio.Event()

    async def slow(payload, ctx: trioqueue.JobContext) -> None:
        started.set()
        await trio.sleep(3600)  # a checkpoint: the cancellation lands here

    config = trioqueue.WorkerConfig(handler=slow, queue="slow", max_job_duration=7200)
    async with trioqueue.open_memory() as backend:
        waiting = await backend.enqueue("slow", None, delay=60)
        job_id = await backend.enqueue("slow", None)
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await started.wait()
            # [start cancel]
            cancelled = await backend.cancel(job_id)
            # [end cancel]
            assert cancelled
            info = await backend.wait_for(job_id)
            nursery.cancel_scope.cancel()
        assert info.status == "failed"
        assert info.last_error is not None
        assert info.last_error.startswith("cancelled"), info.last_error

        # A job that has not started ends failed at once.
        assert await backend.cancel(waiting)
        assert (await backend.get_job(waiting)).status == "failed"
        # A finished job, or an unknown id: False.
        assert not await backend.cancel(job_id)
        assert not await backend.cancel(123_456)


if __name__ == "__main__":
    trio.run(main)
