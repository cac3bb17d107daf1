"""A memory backend, on trio's clock: what the testing page opens with."""

from __future__ import annotations

import trio

import trioqueue


async def main() -> None:
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue("reports", {"month": "2026-11"})
        info = await backend.get_job(job_id)
        assert info.status == "ready"
        assert info.payload == {"month": "2026-11"}


if __name__ == "__main__":
    trio.run(main)
