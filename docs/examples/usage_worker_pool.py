"""Run a worker pool that reports progress (docs/usage.rst, "Run a worker pool")."""

import trio

import trioqueue


async def render_part(payload: dict[str, str], step: int) -> None:
    await trio.sleep(1)  # stands for a part of the real work


# [start pool]
async def process_report(payload, ctx: trioqueue.JobContext) -> None:
    for step in range(10):
        await render_part(payload, step)
        ctx.report_progress((step + 1) / 10)


config = trioqueue.WorkerConfig(
    handler=process_report,
    queue="reports",
    concurrency=4,
    max_job_duration=300,
)
# [end pool]


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("reports", {"month": "2026-11"})
        # [start run]
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            # the pool is claiming now
            info = await backend.wait_for(job_id)
            nursery.cancel_scope.cancel()  # graceful shutdown
        # [end run]
        assert info.status == "succeeded", info
        assert info.progress == 1.0, info.progress


if __name__ == "__main__":
    trio.run(main)
