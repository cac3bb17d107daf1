"""Wait for a job's result (docs/flow.rst, "Results and waiting for a job")."""

import trio

import trioqueue


async def render(payload, ctx: trioqueue.JobContext) -> dict[str, int]:
    await trio.sleep(2)
    return {"page": payload["page"], "bytes": 5120}


async def main() -> None:
    config = trioqueue.WorkerConfig(handler=render, queue="render", max_job_duration=60)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config)
        # [start wait]
        job_id = await backend.enqueue("render", {"page": 3})
        info = await backend.wait_for(job_id, timeout=60)  # TimeoutError after 60 s
        if info.status == "succeeded":
            print(info.result)
        # [end wait]
        assert info.result == {"page": 3, "bytes": 5120}

        # Nobody works on "print": the wait gives up after 60 s.
        waited = await backend.enqueue("print", {"page": 3})
        started = trio.current_time()
        try:
            await backend.wait_for(waited, timeout=60)
        except TimeoutError:
            assert trio.current_time() - started == 60
        else:
            raise AssertionError("nobody finished the job")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
