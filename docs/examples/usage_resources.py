"""Resources shared by every handler of a process.

See docs/usage.rst, "Shared resources".
"""

import contextlib

import httpx
import trio

import trioqueue

seen: list[httpx.AsyncClient] = []


async def make_report(payload, ctx: trioqueue.JobContext) -> None:
    seen.append(ctx.resources)
    assert not ctx.resources.is_closed  # entered before any pool started


# [start resources]
@contextlib.asynccontextmanager
async def resources():
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def send_email(payload, ctx: trioqueue.JobContext) -> None:
    await ctx.resources.post("https://mail.example/send", json=payload)


async def run(backend, configs) -> None:
    await trioqueue.run_workers(backend, configs, resources=resources)
    # [end resources]


async def main() -> None:
    configs = [
        trioqueue.WorkerConfig(handler=send_email, queue="emails", concurrency=8),
        trioqueue.WorkerConfig(
            handler=make_report, queue="reports", max_job_duration=600
        ),
    ]
    async with trioqueue.open_memory() as backend:
        # (No email is sent here: that would need the mail service.)
        job_id = await backend.enqueue("reports", {"month": "2026-11"})
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, backend, configs)
            assert (await backend.wait_for(job_id)).status == "succeeded"
            nursery.cancel_scope.cancel()
    [client] = seen
    assert isinstance(client, httpx.AsyncClient)
    assert client.is_closed  # exited after every pool stopped


if __name__ == "__main__":
    trio.run(main)
