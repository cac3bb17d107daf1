"""How-to: keep finished jobs as long as they are needed; the pools prune the rest."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue


async def send(payload: Any, ctx: trioqueue.JobContext) -> None:
    pass


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        # [start policy]
        # Succeeded emails are kept a day, failed ones a week; every other queue keeps
        # the default (succeeded a week, failed thirty days).
        await backend.set_retention("emails", succeeded=86_400, failed=7 * 86_400)
        retention = await backend.get_retention()
        print(retention.for_queue("emails"))
        # [end policy]
        assert retention.for_queue("emails").succeeded == 86_400

        # [start pool]
        config = trioqueue.WorkerConfig(
            handler=send,
            queue="emails",
            maintenance_interval=300,  # a pass every 5 minutes while this pool prunes
        )
        # [end pool]
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            job_id = await backend.enqueue("emails", {"to": "ada@example.org"})
            await backend.wait_for(job_id, timeout=60)
            # [start who]
            lease = await backend.maintainer()
            if lease is not None:
                print(lease.holder, "prunes; its lease runs to", lease.expires_at)
            # [end who]
            assert lease is not None
            await trio.sleep(86_400 + 600)  # a day later, a pass has pruned the job
            assert await backend.get_jobs([job_id], preview=0) == {}
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
