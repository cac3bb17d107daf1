"""The tutorial's first job: a handler, a job, a worker pool, the job's result.

Runs on the in-memory backend, so no database is needed:
``python tutorial_first_job.py``.
"""

from __future__ import annotations

from typing import Any

import trio

import trioqueue


async def count_words(payload: Any, ctx: trioqueue.JobContext) -> dict[str, int]:
    """The handler: count the words of ``payload["text"]``, one line at a time."""
    lines = payload["text"].splitlines()
    words = 0
    for done, line in enumerate(lines, start=1):
        words += len(line.split())
        ctx.report_progress(done / len(lines))  # a value in [0, 1]
        await trio.sleep(1)  # stands in for real work
    return {"words": words}  # the job's result: any JSON value


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        # 1. Enqueue: a job is a queue name and a JSON payload.
        text = "one two\nthree\nfour five six"
        job_id = await backend.enqueue("words", {"text": text})

        # 2. Run a worker pool on the queue, in the background of a nursery.
        config = trioqueue.WorkerConfig(
            handler=count_words,
            queue="words",
            max_job_duration=60,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)

            # 3. Wait until the job is finished, and look at it.
            info = await backend.wait_for(job_id, timeout=30)
            print(f"job {info.id}: {info.status}, result {info.result}")
            print(f"attempts {info.attempts}, progress {info.progress}")
            assert info.status == "succeeded"
            assert info.result == {"words": 6}

            nursery.cancel_scope.cancel()  # stop the pool (a graceful shutdown)


if __name__ == "__main__":
    trio.run(main)
