"""Cap a queue across every pool (docs/flow.rst, "Limiting a queue")."""

import trio

import trioqueue


async def main() -> None:
    running = 0
    most = 0

    async def send_email(payload, ctx: trioqueue.JobContext) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await trio.sleep(1)
        running -= 1

    config = trioqueue.WorkerConfig(
        handler=send_email, queue="emails", concurrency=50, max_job_duration=60
    )
    async with trioqueue.open_memory() as backend:
        # [start limits]
        await backend.set_queue_limits("emails", max_running=5, max_per_second=20)
        # [end limits]
        ids = await backend.enqueue_many("emails", [{"n": n} for n in range(60)])
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            for job_id in ids:
                assert (await backend.wait_for(job_id)).status == "succeeded"
            nursery.cancel_scope.cancel()
        assert most == 5, most  # never more than max_running at once
        # 60 jobs of 1 s, 5 at a time: at least 12 s.
        assert trio.current_time() - started >= 12

        # [start no_limits]
        await backend.set_queue_limits("emails")  # both None: no limits
        # [end no_limits]
        most = 0
        ids = await backend.enqueue_many("emails", [{"n": n} for n in range(20)])
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            for job_id in ids:
                assert (await backend.wait_for(job_id)).status == "succeeded"
            nursery.cancel_scope.cancel()
        assert most > 5, most


if __name__ == "__main__":
    trio.run(main)
