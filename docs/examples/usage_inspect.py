"""Inspect jobs, and retry a failed one (docs/usage.rst, "Inspect jobs")."""

import trio

import trioqueue


async def main() -> None:
    async def broken(payload, ctx: trioqueue.JobContext) -> None:
        raise RuntimeError("printer on fire")

    config = trioqueue.WorkerConfig(
        handler=broken, queue="reports", max_job_duration=60
    )
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("reports", {"month": "2026-11"}, max_attempts=1)
        await backend.enqueue("reports", {"month": "2026-12"}, delay=3600)
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await backend.wait_for(job_id)
            nursery.cancel_scope.cancel()

        # [start inspect]
        info = await backend.get_job(job_id)  # LookupError if unknown
        print(info.status, info.attempts, info.progress, info.last_error)
        failed = await backend.list_jobs(queue="reports", status="failed", limit=50)
        counts = await backend.counts()  # {"reports": {"ready": 3, "running": 1, ...}}
        await backend.retry(failed[0].id)  # one more attempt for a failed job
        # [end inspect]
        assert info.status == "failed"
        assert info.attempts == 1
        assert info.last_error == "RuntimeError: printer on fire", info.last_error
        assert [job.id for job in failed] == [job_id]
        assert counts["reports"]["failed"] == 1
        assert counts["reports"]["scheduled"] == 1
        assert (await backend.get_job(job_id)).status == "ready"
        try:
            await backend.get_job(123_456)
        except LookupError:
            pass
        else:
            raise AssertionError("an unknown id raises LookupError")


if __name__ == "__main__":
    trio.run(main)
