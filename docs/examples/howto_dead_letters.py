"""How-to: find the jobs that failed for good, see why, and redrive some of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import trio

import trioqueue


async def send(payload: Any, ctx: trioqueue.JobContext) -> None:
    if payload["to"].endswith(".invalid"):
        raise KeyError(payload["to"])
    if payload.get("upstream_down"):
        raise ConnectionError("upstream refused the connection")


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        config = trioqueue.WorkerConfig(
            handler=send, queue="emails", max_job_duration=60
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(trioqueue.run_worker_pool, backend, config)
            payloads = [
                {"to": "ada@example.org", "upstream_down": True},
                {"to": "bob@example.org", "upstream_down": True},
                {"to": "eve@example.invalid"},
            ]
            ids = await backend.enqueue_many("emails", payloads, max_attempts=1)
            for job_id in ids:
                await backend.wait_for(job_id, timeout=60)
            nursery.cancel_scope.cancel()

        # [start look]
        summary = await backend.dead_letter_summary(queue="emails")
        print(summary.total, "dead letters; by error type:", summary.by_error_type)
        for dead in await backend.list_dead_letters(queue="emails", limit=20):
            print(dead.id, dead.error_type, dead.last_error, dead.finished_at)
        # [end look]
        assert summary.total == 3
        assert dict(summary.by_error_type) == {
            "ConnectionError": 2,
            "KeyError": 1,
        }

        # [start redrive]
        # The upstream is back: redrive what it refused in the last day, not the bad
        # addresses (a KeyError would only fail again).
        since = datetime.now(UTC) - timedelta(days=1)
        redriven = await backend.retry_matching(
            "emails", error_type="ConnectionError", failed_since=since
        )
        print(redriven, "back on the queue")
        # [end redrive]
        assert redriven == 2
        assert [d.error_type for d in await backend.list_dead_letters()] == ["KeyError"]


if __name__ == "__main__":
    trio.run(main)
