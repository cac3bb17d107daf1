"""How-to: handle a whole batch of jobs in one call, one outcome per job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

import trioqueue
from trioqueue import BatchContext, Job, JobFailed, JobRetry, JobSucceeded


async def send_many(addresses: list[str]) -> dict[str, str]:
    """Stands in for one bulk API call: a status per address."""
    await trio.sleep(0.5)
    return {
        a: "busy" if a.startswith("busy") else "bad" if "@" not in a else "sent"
        for a in addresses
    }


async def send_emails(jobs: Sequence[Job], ctx: BatchContext) -> dict[int, Any]:
    # A job asked to cancel meanwhile ends cancelled whatever we answer: skip it.
    todo = [job for job in jobs if not ctx.stop_requested(job.id)]
    statuses = await send_many([job.payload["to"] for job in todo])
    outcomes: dict[int, Any] = {}
    for job in todo:
        status = statuses[job.payload["to"]]
        if status == "sent":
            outcomes[job.id] = JobSucceeded({"sent_to": job.payload["to"]})
        elif status == "busy":
            outcomes[job.id] = JobRetry(
                60, "mail server busy"
            )  # charged, again in 60 s
        else:
            outcomes[job.id] = JobFailed(
                ValueError(f"bad address {job.payload['to']!r}")
            )
    return outcomes  # a job left out would fail: "returned no outcome for job N"


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(
            batch_handler=send_emails,  # instead of handler=...
            queue="emails",
            batch_size=50,  # up to 50 jobs per call
            visibility_timeout=30,
            heartbeat_interval=10,
            max_job_duration=120,  # for the whole call
        )
        addresses = ["ann@example.org", "busy@example.org", "nobody"]
        ids = [
            await backend.enqueue("emails", {"to": a}, max_attempts=2)
            for a in addresses
        ]
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            infos = [await backend.wait_for(job_id) for job_id in ids]
            nursery.cancel_scope.cancel()
        for info in infos:
            print(
                info.payload["to"],
                info.status,
                info.attempts,
                info.result,
                info.last_error,
            )
        assert [(i.status, i.attempts) for i in infos] == [
            ("succeeded", 1),
            ("failed", 2),  # busy twice: retried once, then out of attempts
            ("failed", 2),
        ]
        assert infos[0].result == {"sent_to": "ann@example.org"}
        assert infos[2].last_error == "ValueError: bad address 'nobody'"


if __name__ == "__main__":
    trio.run(main)
