"""One job at a time per group key.

See docs/flow.rst, "Groups: one job at a time per key".
"""

import trio

import trioqueue


async def main() -> None:
    done: list[tuple[int, int]] = []
    running: set[int] = set()

    async def sync(payload, ctx: trioqueue.JobContext) -> None:
        customer = payload["customer"]
        assert customer not in running, "two jobs of one group at once"
        running.add(customer)
        await trio.sleep(5)
        running.discard(customer)
        done.append((customer, payload["step"]))

    config = trioqueue.WorkerConfig(
        handler=sync, queue="sync", concurrency=10, max_job_duration=60
    )
    async with trioqueue.open_memory() as backend:
        # [start groups]
        await backend.enqueue("sync", {"customer": 42, "step": 1}, group="customer-42")
        await backend.enqueue("sync", {"customer": 42, "step": 2}, group="customer-42")
        await backend.enqueue("sync", {"customer": 7, "step": 1}, group="customer-7")
        # [end groups]
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            for job in await backend.list_jobs(queue="sync"):
                assert (await backend.wait_for(job.id)).status == "succeeded"
            nursery.cancel_scope.cancel()
        # customer 7 ran beside customer 42's first step; 42's steps in order
        assert [step for customer, step in done if customer == 42] == [1, 2]
        assert done.index((7, 1)) < done.index((42, 2)), done
        assert {job.group for job in await backend.list_jobs(queue="sync")} == {
            "customer-42",
            "customer-7",
        }


if __name__ == "__main__":
    trio.run(main)
