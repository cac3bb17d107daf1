"""How-to: wait for an outside resource without burning attempts: snooze."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue

#: An outside service that is busy for the first two tries (a rate limit, a lock).
busy_answers = ["busy: try in 30s", "busy: try in 60s"]


async def call_partner(
    payload: Any, ctx: trioqueue.JobContext
) -> str | trioqueue.Snooze:
    if busy_answers:
        wait = 30 if busy_answers.pop(0).endswith("30s") else 60
        # Not a failure: the job runs again in `wait` seconds, this attempt not charged.
        return trioqueue.Snooze(wait)  # or: raise trioqueue.Snooze(wait)
    return f"sent {payload['order']}"


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(
            handler=call_partner,
            queue="partner",
            max_job_duration=60,
            max_snoozes=20,  # after 20 snoozes the job fails for good, so it is noticed
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            job_id = await backend.enqueue("partner", {"order": 7}, max_attempts=1)
            info = await backend.wait_for(job_id)
            print(
                f"{info.status} after {info.snoozes} snoozes, {info.attempts} attempt"
            )
            assert (info.status, info.result) == ("succeeded", "sent 7")
            assert (info.attempts, info.snoozes) == (1, 2)  # one charged attempt of one
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
