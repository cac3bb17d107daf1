"""How-to: a worker module to deploy, run by ``trioqueue worker``.

``trioqueue worker howto_deploy_worker:QUEUES --resources
howto_deploy_worker:resources`` runs one pool per queue of ``QUEUES``. ``main()``
runs the same pools on the in-memory backend, to check that the module works.
"""

from __future__ import annotations

import contextlib
import dataclasses  # for main() only
import functools  # for main() only
from collections.abc import AsyncIterator
from typing import Any

import trio

import trioqueue


class Mailer:
    """Stands in for an HTTP client, a connection pool of another service, ..."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send(self, message: Any) -> None:
        await trio.sleep(0.1)
        self.sent.append(message)


@contextlib.asynccontextmanager
async def resources() -> AsyncIterator[Mailer]:
    """Entered once per process before any pool starts; exited after they stop."""
    yield Mailer()


async def send_email(payload: Any, ctx: trioqueue.JobContext) -> None:
    await ctx.resources.send(payload)


async def make_report(payload: Any, ctx: trioqueue.JobContext) -> dict[str, Any]:
    await trio.sleep(1)
    return {"report": payload["month"]}


QUEUES = {
    # a handler: takes the command line's pool options
    "emails": send_email,
    # a whole config: settings of its own
    "reports": trioqueue.WorkerConfig(
        handler=make_report,
        concurrency=2,
        max_job_duration=900,
    ),
}


async def main() -> None:
    # What `trioqueue worker howto_deploy_worker:QUEUES` builds from the mapping.
    configs = [
        dataclasses.replace(spec, queue=queue)
        if isinstance(spec, trioqueue.WorkerConfig)
        else trioqueue.WorkerConfig(handler=spec, queue=queue, max_job_duration=60)
        for queue, spec in QUEUES.items()
    ]
    run = functools.partial(trioqueue.run_workers, resources=resources)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(run, backend, configs)
        email = await backend.enqueue("emails", {"to": "ada@example.org"})
        report = await backend.enqueue("reports", {"month": "2026-11"})
        assert (await backend.wait_for(email, timeout=60)).status == "succeeded"
        info = await backend.wait_for(report, timeout=60)
        assert info.result == {"report": "2026-11"}
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
