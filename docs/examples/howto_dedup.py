"""How-to: deduplicate, replace, debounce (docs/howto/dedup.rst)."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue

indexed: list[Any] = []  # what the handler ran, for the example's own check


async def reindex(payload: Any, ctx: trioqueue.JobContext) -> None:
    indexed.append(payload)
    await trio.sleep(5)  # stands in for the real work


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        # [start debounce]
        # Every edit of a document asks for a reindex; a burst of edits makes one job,
        # which runs once the document has been quiet for 30 s.
        for edit in range(5):
            done = await backend.enqueue_deduplicated(
                "search",
                {"doc": 42, "edit": edit},
                dedup_key="reindex-42",
                delay=30,
                on_duplicate="debounce",
            )
            print(done.outcome)  # added, then debounced four times
            await trio.sleep(10)  # the next edit comes before the 30 s are up
        # [end debounce]
        job_id = done.id
        info = await backend.get_job(job_id)
        assert (info.status, info.payload) == ("scheduled", {"doc": 42, "edit": 0})

        # [start replace]
        # The newest settings win: a waiting sync job gets the latest payload (and this
        # call's priority and delay); a new job is added only when none waits.
        latest = await backend.enqueue_deduplicated(
            "search",
            {"doc": 42, "edit": 5, "full": True},
            dedup_key="reindex-42",
            priority=5,
            on_duplicate="replace",
        )
        assert (latest.id, latest.added, latest.outcome) == (job_id, False, "replaced")
        # [end replace]
        info = await backend.get_job(job_id)
        assert (info.status, info.priority) == ("ready", 5)

        claimed = trio.Event()

        async def on_job_claimed(job: trioqueue.Job) -> None:
            claimed.set()

        config = trioqueue.WorkerConfig(
            handler=reindex,
            queue="search",
            on_job_claimed=on_job_claimed,
            max_job_duration=60,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            await claimed.wait()
            # [start running]
            # A running job is never changed: its handler has its payload already.
            late = await backend.enqueue_deduplicated(
                "search",
                {"doc": 42, "edit": 6},
                dedup_key="reindex-42",
                on_duplicate="replace",
            )
            if late.outcome == "running":
                await backend.wait_for(late.id)  # let it finish, then ask again
                late = await backend.enqueue_deduplicated(
                    "search", {"doc": 42, "edit": 6}, dedup_key="reindex-42"
                )
            # [end running]
            assert late.added
            assert late.id != job_id
            assert (await backend.wait_for(late.id)).status == "succeeded"
            nursery.cancel_scope.cancel()
        assert indexed == [{"doc": 42, "edit": 5, "full": True}, {"doc": 42, "edit": 6}]


if __name__ == "__main__":
    trio.run(main)
