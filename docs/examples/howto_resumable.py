"""How-to: a resumable long job: checkpoint as it goes, resume where it got."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue

crashes_left = 1  # the first attempt dies half way, as a worker killed mid-job would


async def export_pages(payload: Any, ctx: trioqueue.JobContext) -> int:
    global crashes_left
    start = ctx.last_checkpoint or {"next_page": 0}  # None on the first attempt
    for page in range(start["next_page"], payload["pages"]):
        await trio.sleep(10)  # export one page
        ctx.checkpoint({"next_page": page + 1})  # stored by the next heartbeat
        if page == 4 and crashes_left:
            crashes_left -= 1
            raise ConnectionError("the export target went away")
    return start["next_page"]  # where this attempt began


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(
            handler=export_pages,
            queue="exports",
            visibility_timeout=30,
            heartbeat_interval=10,
            max_job_duration=600,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            job_id = await backend.enqueue("exports", {"pages": 8})
            info = await backend.wait_for(job_id)
            print("attempts:", info.attempts, "second began at page", info.result)
            print("last checkpoint:", info.checkpoint)
            assert (info.status, info.attempts, info.result) == ("succeeded", 2, 5)
            assert info.checkpoint == {"next_page": 8}
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
