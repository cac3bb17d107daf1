"""Derive a config with ``dataclasses.replace`` (docs/configuration.rst)."""

import trio

import trioqueue


async def process_report(payload, ctx) -> None:
    pass


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("reports", {"month": "2026-11"})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, backend)
            assert (await backend.wait_for(job_id)).status == "succeeded"
            nursery.cancel_scope.cancel()


async def run(backend) -> None:
    """The page's snippet: its imports are the module's own, repeated to show them."""
    # [start replace]
    import dataclasses

    import trioqueue

    config = trioqueue.WorkerConfig(handler=process_report, queue="reports")
    report_config = dataclasses.replace(config, max_job_duration=300)

    await trioqueue.run_worker_pool(backend, report_config)
    # [end replace]


if __name__ == "__main__":
    trio.run(main)
