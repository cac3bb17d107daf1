"""Handlers and hooks the benchmark scripts share."""

from __future__ import annotations

from typing import Any

import trio

import trioqueue


async def noop(payload: Any, ctx: trioqueue.JobContext) -> None:
    """A handler that does nothing: what is left to measure is the queue."""


class Countdown:
    """``done`` is set once :meth:`tick` has been called ``count`` times."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.done = trio.Event()

    def tick(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.done.set()

    async def on_job(self, job: trioqueue.Job) -> None:
        """As a hook (``on_job_succeeded=countdown.on_job``): one tick per job."""
        self.tick()

    async def sleeper(self, payload: Any, ctx: trioqueue.JobContext) -> None:
        """As a handler: one tick when the job starts, then sleep until cancelled."""
        self.tick()
        await trio.sleep_forever()
