"""The tutorial's first job again, on your own PostgreSQL.

``TRIOQUEUE_DSN=postgresql://USER@HOST/DB python tutorial_postgres.py`` creates (or
upgrades) the ``trioqueue`` schema, runs one job and prints it. The module is also the
tutorial's handler module for the command line:
``trioqueue worker tutorial_postgres:count_words --queue words``.
"""

from __future__ import annotations

import os
from typing import Any

import trio

import trioqueue


async def count_words(payload: Any, ctx: trioqueue.JobContext) -> dict[str, int]:
    """The same handler as on the memory backend."""
    lines = payload["text"].splitlines()
    words = 0
    for done, line in enumerate(lines, start=1):
        words += len(line.split())
        ctx.report_progress(done / len(lines))
        await trio.sleep(0.1)  # stands in for real work
    return {"words": words}


async def main(dsn: str, schema: str = "trioqueue") -> None:
    async with trioqueue.open_postgres(dsn, schema=schema) as backend:
        await backend.migrate()  # idempotent: creates or upgrades the schema
        text = "one two\nthree\nfour five six"
        job_id = await backend.enqueue("words", {"text": text})

        config = trioqueue.WorkerConfig(
            handler=count_words,
            queue="words",
            max_job_duration=60,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            info = await backend.wait_for(job_id, timeout=30)
            print(f"job {info.id}: {info.status}, result {info.result}")
            assert info.status == "succeeded"
            assert info.result == {"words": 6}
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, os.environ["TRIOQUEUE_DSN"])
