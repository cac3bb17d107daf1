"""How-to: report a job's progress, and read it while the job runs."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue


async def import_rows(payload: Any, ctx: trioqueue.JobContext) -> None:
    chunks = payload["chunks"]
    for done in range(1, chunks + 1):
        await trio.sleep(15)  # import one chunk
        ctx.report_progress(done / chunks)  # stored by the next heartbeat


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(
            handler=import_rows,
            queue="imports",
            visibility_timeout=30,
            heartbeat_interval=10,  # progress reaches the database this often
            max_job_duration=600,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            job_id = await backend.enqueue("imports", {"chunks": 4})

            # Anyone may read the stored progress: a web page, `trioqueue show`.
            seen = []
            while (info := await backend.get_job(job_id)).status != "succeeded":
                seen.append(info.progress)
                await trio.sleep(5)
            print("progress seen while running:", seen)
            print("final:", info.progress)
            assert seen[0] is None
            assert info.progress == 1.0
            assert any(p is not None and 0 < p < 1 for p in seen)
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
