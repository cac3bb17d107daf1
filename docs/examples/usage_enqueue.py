"""Enqueue jobs: one, delayed, urgent, many (docs/usage.rst, "Enqueue jobs")."""

import trio

import trioqueue


async def main() -> None:
    # [start enqueue]
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("reports", {"month": "2026-11"})
        later = await backend.enqueue("reports", {"month": "2026-12"}, delay=3600)
        urgent = await backend.enqueue("reports", {"month": "2026-10"}, priority=10)
        ids = await backend.enqueue_many("reports", [{"n": n} for n in range(100)])
        # [end enqueue]
        assert (await backend.get_job(job_id)).status == "ready"
        assert (await backend.get_job(later)).status == "scheduled"
        assert (await backend.get_job(urgent)).status == "ready"
        assert len(ids) == 100

        # A payload without a JSON form raises TypeError and writes nothing.
        try:
            await backend.enqueue("reports", {"when": {1, 2}})
        except TypeError:
            pass
        else:
            raise AssertionError("a set is not a JSON value")
        assert (await backend.counts())["reports"]["ready"] == 102

        # A dedup_key taken by an unfinished job returns that job's id.
        first, added = await backend.enqueue_deduplicated(
            "reports", {"month": "2026-11"}, dedup_key="report-2026-11"
        )
        again, added_again = await backend.enqueue_deduplicated(
            "reports", {"month": "2026-11"}, dedup_key="report-2026-11"
        )
        assert (again, added, added_again) == (first, True, False)

        # Higher priority first, then enqueue order; the delayed job once it is due.
        ran: list[int] = []

        async def record(payload, ctx: trioqueue.JobContext) -> None:
            ran.append(ctx.job_id)

        config = trioqueue.WorkerConfig(
            handler=record, queue="reports", max_job_duration=60
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            assert (await backend.wait_for(later)).status == "succeeded"
            nursery.cancel_scope.cancel()
        assert ran == [urgent, job_id, *ids, first, later], ran


if __name__ == "__main__":
    trio.run(main)
