"""How-to: a pipeline of dependencies: each step runs after the steps it needs."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue

ran: list[str] = []


async def step(payload: Any, ctx: trioqueue.JobContext) -> str:
    await trio.sleep(1)  # the step's work
    ran.append(payload["step"])
    return payload["step"]


async def build_pipeline(backend: trioqueue.MemoryBackend) -> int:
    fetch = await backend.enqueue("pipeline", {"step": "fetch"})
    # Three resizes after the fetch, in one statement; they may run side by side.
    sizes = await backend.enqueue_many(
        "pipeline",
        [{"step": f"resize-{size}"} for size in (64, 256, 1024)],
        depends_on=[fetch],
    )
    # The publish waits for every resize (a fan-in); if one fails for good, it is
    # cancelled rather than failed.
    return await backend.enqueue(
        "pipeline",
        {"step": "publish"},
        depends_on=sizes,
        on_dependency_failure="cancel",
    )


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(handler=step, queue="pipeline", concurrency=4)
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            publish = await build_pipeline(backend)
            waiting = await backend.get_job(publish)
            print("publish waits for", waiting.waiting_on)
            info = await backend.wait_for(publish)
            print("ran:", ran)
            assert info.status == "succeeded"
            assert ran[0] == "fetch"
            assert ran[-1] == "publish"
            assert sorted(ran[1:4]) == ["resize-1024", "resize-256", "resize-64"]
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
