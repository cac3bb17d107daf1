"""A worker module for ``trioqueue worker`` (docs/usage.rst, "Deploying a worker").

Run as ``trioqueue worker myapp.worker:QUEUES --resources myapp.worker:resources
--concurrency 8 --max-job-duration 60``; ``main`` builds the same pools as that command.
"""

# [start module]
# myapp/worker.py
import contextlib

import httpx

import trioqueue


@contextlib.asynccontextmanager
async def resources():
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def send_email(payload, ctx: trioqueue.JobContext) -> None:
    await ctx.resources.post("https://mail.example/send", json=payload)


async def make_report(payload, ctx: trioqueue.JobContext) -> None: ...


QUEUES = {
    "emails": send_email,
    "reports": trioqueue.WorkerConfig(
        handler=make_report,
        concurrency=2,
        max_job_duration=900,
    ),
}
# [end module]


def worker_configs(options: dict[str, float]) -> list[trioqueue.WorkerConfig]:
    """The pools ``trioqueue worker myapp.worker:QUEUES`` runs: the options apply to the
    queues given a handler; a queue given a WorkerConfig keeps its own."""
    import dataclasses

    return [
        dataclasses.replace(spec, queue=queue)
        if isinstance(spec, trioqueue.WorkerConfig)
        else trioqueue.WorkerConfig(handler=spec, queue=queue, **options)
        for queue, spec in QUEUES.items()
    ]


async def main() -> None:
    import trio

    configs = worker_configs({"concurrency": 8, "max_job_duration": 60})
    assert [(c.queue, c.concurrency, c.max_job_duration) for c in configs] == [
        ("emails", 8, 60),
        ("reports", 2, 900),
    ]
    async with trioqueue.open_memory() as backend:
        # (No email is sent here: that would need the mail service.)
        job_id = await backend.enqueue("reports", {"month": "2026-11"})
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: trioqueue.run_workers(
                    backend, configs, resources=resources, task_status=task_status
                )
            )
            assert (await backend.wait_for(job_id)).status == "succeeded"
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    import trio

    trio.run(main)
