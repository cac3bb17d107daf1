"""Pause a queue and resume it (docs/flow.rst, "Pausing a queue")."""

import trio

import trioqueue


async def make_report(payload, ctx: trioqueue.JobContext) -> None:
    pass


async def main() -> None:
    config = trioqueue.WorkerConfig(
        handler=make_report, queue="reports", max_job_duration=60
    )
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config)
        # [start pause]
        await backend.pause_queue("reports")  # no pool claims from it any more
        # [end pause]
        job_id = await backend.enqueue("reports", {"month": "2026-11"})  # it waits
        try:
            await backend.wait_for(job_id, timeout=600)
        except TimeoutError:
            pass
        else:
            raise AssertionError("a paused queue is claimed by nobody")
        assert (await backend.get_job(job_id)).status == "ready"
        # [start resume]
        await backend.resume_queue(
            "reports"
        )  # claimable again; idle pools hear of it at once
        # [end resume]
        resumed = trio.current_time()
        assert (await backend.wait_for(job_id)).status == "succeeded"
        assert (
            trio.current_time() - resumed < config.poll_interval
        )  # not at the next poll
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
