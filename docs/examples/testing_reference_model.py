"""Driving the reference model directly: no event loop, a float clock."""

from __future__ import annotations

import trio

from trioqueue._backends.memory.model import MemoryModel
from trioqueue._backends.validation import check_enqueue
from trioqueue._types import Ack


def drive_the_model() -> None:
    model = MemoryModel()
    request = check_enqueue(
        "q",
        [{"n": 1}],
        priority=0,
        delay=0.0,
        max_attempts=3,
        dedup_key=None,
    )
    [job_id], _ = model.enqueue(100.0, request)
    [claimed] = model.claim(101.0, "q", 1, "worker-1", 30.0)
    assert claimed.lease_until == 131.0  # the lease counts from the claim's now
    assert model.ack(102.0, [Ack(job_id, claimed.job.claim_seq)]) == [True]
    job = model.get_job(102.0, job_id)
    assert job is not None
    assert job.status == "succeeded"


async def main() -> None:
    drive_the_model()  # synchronous: the runner's trio.run is only its host


if __name__ == "__main__":
    trio.run(main)
