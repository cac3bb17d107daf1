"""One pool per queue in one process.

See docs/usage.rst, "Several queues in one process".
"""

import trio

import trioqueue

sent: list[str] = []


async def send_email(payload, ctx: trioqueue.JobContext) -> None:
    sent.append(payload["to"])


async def make_report(payload, ctx: trioqueue.JobContext) -> dict[str, str]:
    await trio.sleep(120)
    return {"month": payload["month"], "pages": "12"}


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        email = await backend.enqueue("emails", {"to": "ada@example.com"})
        report = await backend.enqueue("reports", {"month": "2026-11"})
        # [start run_workers]
        configs = [
            trioqueue.WorkerConfig(handler=send_email, queue="emails", concurrency=8),
            trioqueue.WorkerConfig(
                handler=make_report, queue="reports", max_job_duration=600
            ),
        ]
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_workers, backend, configs)
            # every pool is claiming now
            for job_id in (email, report):
                assert (await backend.wait_for(job_id)).status == "succeeded"
            nursery.cancel_scope.cancel()  # every pool shuts down gracefully
        # [end run_workers]
        assert sent == ["ada@example.com"]

        # Every problem of every config at once, each prefixed with its queue.
        bad = [
            trioqueue.WorkerConfig(handler=send_email, queue="emails"),
            trioqueue.WorkerConfig(
                handler=make_report,
                queue="reports",
                heartbeat_interval=60,
                visibility_timeout=60,
            ),
        ]
        try:
            await trioqueue.run_workers(backend, bad)
        except trioqueue.ConfigError as exc:
            message = str(exc)
        else:
            raise AssertionError("the configs have a problem")
        assert (
            "queue 'reports': heartbeat_interval (60s) must be less than" in message
        ), message


if __name__ == "__main__":
    trio.run(main)
