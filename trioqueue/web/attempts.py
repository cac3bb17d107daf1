"""The attempt history as the JSON API gives it (docs/dashboard.rst, "JSON API"): a job's
attempts, a queue's timings, the buckets of its history (``trioqueue.AttemptInfo``,
``QueueTimings``, ``AttemptBucket``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import trioqueue

__all__ = ["attempt_json", "bucket_json", "timings_json"]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def attempt_json(info: trioqueue.AttemptInfo) -> dict[str, Any]:
    """One attempt of a job (``GET /api/jobs/{id}/attempts``), its fields as recorded."""
    return {
        "attempt": info.attempt,
        "claim_seq": info.claim_seq,
        "outcome": info.outcome,
        "worker_id": info.worker_id,
        "host": info.host,
        "claimed_at": _iso(info.claimed_at),
        "started_at": _iso(info.started_at),
        "finished_at": _iso(info.finished_at),
        "run_seconds": info.run_seconds,
        "wait_seconds": info.wait_seconds,
        "error_type": info.error_type,
        "error": info.error,
        "traceback": info.traceback,
    }


def timings_json(queue: str, window: int, info: trioqueue.QueueTimings | None) -> dict[str, Any]:
    """A queue's run time and wait percentiles over ``window`` seconds (None: no attempt
    finished in it, so every percentile is null)."""
    names = ("run_p50", "run_p95", "run_p99", "wait_p50", "wait_p95", "wait_p99")
    return {
        "queue": queue,
        "window": window,
        "attempts": 0 if info is None else info.attempts,
    } | {name: None if info is None else getattr(info, name) for name in names}


def bucket_json(info: trioqueue.AttemptBucket) -> dict[str, Any]:
    return {
        "start": _iso(info.start),
        "succeeded": info.succeeded,
        "failed": info.failed,
        "cancelled": info.cancelled,
        "run_p50": info.run_p50,
        "run_p95": info.run_p95,
        "wait_p50": info.wait_p50,
        "wait_p95": info.wait_p95,
    }
