"""Helpers for tests that run whole worker pools on the memory backend."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import Job, JobContext


@dataclass
class Event:
    at: float
    kind: str  # claimed, started, stopped, returned, raised, succeeded, failed, retry, unavailable
    job_id: int
    detail: Any = None
    attempt: int = 0


@dataclass
class Recorder:
    """Records every hook call and handler milestone, with trio's clock."""

    events: list[Event] = field(default_factory=list)
    changed: trio.Event = field(default_factory=trio.Event)

    def add(self, kind: str, job_id: int, detail: Any = None, attempt: int = 0) -> None:
        self.events.append(Event(trio.current_time(), kind, job_id, detail, attempt))
        self.changed.set()
        self.changed = trio.Event()

    def of(self, kind: str, job_id: int | None = None) -> list[Event]:
        return [e for e in self.events if e.kind == kind and job_id in (None, e.job_id)]

    def kinds(self, job_id: int) -> list[str]:
        return [e.kind for e in self.events if e.job_id == job_id]

    async def wait_for(self, kind: str, job_id: int | None = None, count: int = 1) -> Event:
        while len(self.of(kind, job_id)) < count:
            await self.changed.wait()
        return self.of(kind, job_id)[count - 1]

    # hooks
    async def on_job_claimed(self, job: Job) -> None:
        self.add("claimed", job.id, None, job.attempt)

    async def on_job_unavailable(self, job: Job, reason: str) -> None:
        self.add("unavailable", job.id, reason, job.attempt)

    async def on_job_succeeded(self, job: Job) -> None:
        self.add("succeeded", job.id, None, job.attempt)

    async def on_job_failed(self, job: Job, error: str) -> None:
        self.add("failed", job.id, error, job.attempt)

    async def on_job_retry(self, job: Job, delay: float) -> None:
        self.add("retry", job.id, delay, job.attempt)

    def hooks(self) -> dict[str, Any]:
        return {
            "on_job_claimed": self.on_job_claimed,
            "on_job_unavailable": self.on_job_unavailable,
            "on_job_succeeded": self.on_job_succeeded,
            "on_job_failed": self.on_job_failed,
            "on_job_retry": self.on_job_retry,
        }

    def sleeper(self) -> Callable[[Any, JobContext], Awaitable[None]]:
        """A handler that sleeps ``payload["sleep"]`` seconds, recording start and stop."""

        async def handler(payload: Any, ctx: JobContext) -> None:
            self.add("started", ctx.job_id, ctx.attempt, ctx.attempt)
            options = payload if isinstance(payload, dict) else {}
            try:
                await trio.sleep(options.get("sleep", 0))
            except trio.Cancelled:
                self.add("stopped", ctx.job_id, None, ctx.attempt)
                raise
            if options.get("fail_attempts", 0) >= ctx.attempt:
                self.add("raised", ctx.job_id, None, ctx.attempt)
                raise RuntimeError(f"planned failure on attempt {ctx.attempt}")
            self.add("returned", ctx.job_id, None, ctx.attempt)

        return handler


def config(recorder: Recorder, **overrides: Any) -> trioqueue.WorkerConfig:
    base = trioqueue.WorkerConfig(
        handler=recorder.sleeper(),
        queue="q",
        visibility_timeout=10,
        heartbeat_interval=2,
        poll_interval=1,
        **recorder.hooks(),
    )
    return dataclasses.replace(base, **overrides)


def log_records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    """The records ``caplog`` captured of the structured event ``event``."""
    return [r for r in caplog.records if getattr(r, "event", None) == event]


async def inject_faults(
    backend: trioqueue.MemoryBackend,
    injections: list[tuple[float, str, Any]],
    *,
    heal_at: float,
    ops: tuple[str, ...],
) -> None:
    """Inject each ``(at, op, fault)`` at its time, then lift every fault of ``ops`` at
    ``heal_at`` (so that every job can finish)."""
    for at, op, injected in injections:
        await trio.sleep_until(at)
        backend.inject(op, injected)
    await trio.sleep_until(heal_at)
    for op in ops:
        backend.inject(op, None)


async def finish_all(
    backend: trioqueue.MemoryBackend, ids: list[int], *, give_up: float, ops: tuple[str, ...]
) -> dict[int, trioqueue.JobInfo]:
    """Wait (up to ``give_up`` seconds) until every job of ``ids`` has finished, then read
    each one and lift the faults injected into ``ops`` (a job still unfinished was lost)."""
    with trio.move_on_after(give_up):
        for job_id in ids:
            while (await backend.get_job(job_id)).status not in ("succeeded", "failed"):
                await trio.sleep(1)
    finals = {job_id: await backend.get_job(job_id) for job_id in ids}
    for op in ops:
        backend.inject(op, None)
    return finals
