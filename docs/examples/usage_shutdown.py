"""Cut the shutdown grace short with ``stop_now`` (docs/usage.rst, "Shutdown")."""

import functools

import trio

import trioqueue


async def main() -> None:
    started = trio.Event()

    async def slow(payload, ctx: trioqueue.JobContext) -> None:
        started.set()
        await trio.sleep(3600)

    config = trioqueue.WorkerConfig(
        handler=slow, queue="slow", max_job_duration=7200, shutdown_grace=600
    )
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("slow", None)
        begun = trio.current_time()
        # [start stop_now]
        stop_now = trio.Event()
        async with trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(
                    trioqueue.run_worker_pool, backend, config, stop_now=stop_now
                )
            )
            await started.wait()  # a handler is running
            # graceful: handlers go on for up to shutdown_grace
            nursery.cancel_scope.cancel()
            stop_now.set()  # ... or not at all
        # [end stop_now]
        # The handler was cancelled at once and its job released, the attempt uncharged.
        assert trio.current_time() - begun < config.shutdown_grace
        info = await backend.get_job(job_id)
        assert info.status == "ready", info
        assert info.attempts == 0, info


if __name__ == "__main__":
    trio.run(main)
