"""The dashboard's tests: an HTTP client on the ASGI app (tests/unit/conftest.py gives
each test its memory ``backend``)."""

from __future__ import annotations

from typing import Any

import httpx

import trioqueue
from trioqueue._types import Failure

BASE = "http://127.0.0.1"
#: The Origin header of a same-origin state-changing request.
SAME_SITE = {"Origin": BASE}


def client(app: Any, **kwargs: Any) -> httpx.AsyncClient:
    """A client that calls ``app`` in-process, as if served at :data:`BASE`."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, **kwargs)


async def dead_letter(
    backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
    queue: str = "mail",
    error: str = "ValueError: boom",
    error_type: str | None = "builtins.ValueError",
) -> int:
    """A job of ``queue`` that failed for good: its one attempt failed with ``error``."""
    job_id = await backend.enqueue(queue, {"secret": 1}, max_attempts=1)
    [claimed] = await backend.claim(queue, limit=1, worker_id="w", visibility_timeout=60)
    failure = Failure(job_id, claimed.job.claim_seq, error, None, error_type=error_type)
    await backend.fail([failure])
    return job_id
