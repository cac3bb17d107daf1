"""A handler's return value is the job's result (docs/usage.rst, "Results")."""

import trio

import trioqueue


# [start handler]
async def resize(payload, ctx):
    await trio.sleep(1)  # the work: open, scale, save
    return {"width": 640, "height": 480}  # any JSON value
    # [end handler]


async def main() -> None:
    config = trioqueue.WorkerConfig(handler=resize, queue="images", max_job_duration=60)
    async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config)
        # [start wait]
        job_id = await backend.enqueue("images", {"path": "cat.png"})
        info = await backend.wait_for(job_id, timeout=60)
        if info.status == "succeeded":
            print(info.result["width"])  # 640
        else:
            print("failed:", info.last_error)
        # [end wait]
        assert info.status == "succeeded"
        assert info.result == {"width": 640, "height": 480}
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
