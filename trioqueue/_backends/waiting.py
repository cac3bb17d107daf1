"""Waiting for a job to finish: the loop behind both backends' ``wait_for``.

A backend supplies how to read the job and how to wait for a change: the memory backend
wakes on its own finishing statements; PostgreSQL on the NOTIFY a finish sends when the
job is awaited, with a slow poll behind it (``postgres/finishes.py``; docs/postgres.rst,
"Results").
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import trio

from trioqueue._backends.validation import check_age, check_job_id
from trioqueue._types import JobInfo

__all__ = ["FINISHED", "wait_finished"]

FINISHED = ("succeeded", "failed")

#: Arms a wake-up before a read, so that a change made during the read is not missed;
#: the callable it returns waits for the next (possible) change.
Arm = Callable[[], Callable[[], Awaitable[None]]]


async def wait_finished(
    job_id: object,
    timeout: object,  # noqa: ASYNC109 (wait_for's argument, checked here)
    read: Callable[[int], Awaitable[JobInfo]],
    arm: Arm,
) -> JobInfo:
    """The job's JobInfo once it is finished (succeeded or failed).

    ``timeout`` bounds the waiting between reads, not a read itself (a statement has its
    own timeout): ``timeout=0`` reads once.

    Raises:
        UnknownJobError: no job has this id (also when it is deleted meanwhile).
        TimeoutError: the job was not finished after ``timeout`` seconds.
        TypeError, ValueError: a bad ``job_id`` or ``timeout``; nothing is read.
    """
    checked_id = check_job_id(job_id)
    limit = math.inf if timeout is None else check_age("timeout", timeout)
    deadline = trio.current_time() + limit
    while True:
        woken = arm()
        info = await read(checked_id)
        if info.status in FINISHED:
            return info
        with trio.move_on_at(deadline) as scope:
            await woken()
        if scope.cancelled_caught:
            info = await read(checked_id)  # one last look: it may have finished just now
            if info.status in FINISHED:
                return info
            raise TimeoutError(f"job {checked_id} did not finish within {limit:g}s")
