"""The attempt history as the JSON API gives it (docs/dashboard.rst, "JSON API"): a job's
attempts, a queue's timings, the buckets of its history.

The backends' row types (``AttemptInfo``, ``QueueTimings``, ``AttemptBucket``) are not in
``trioqueue.__all__``, and the dashboard imports only that public API (docs/architecture.rst,
the layering test), so what it reads of each is written down here as a protocol, which
the backends' frozen dataclasses match.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

__all__ = ["Attempt", "Bucket", "Timings", "attempt_json", "bucket_json", "timings_json"]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


class Attempt(Protocol):
    """What the API reads of an attempt (the backends' ``AttemptInfo``)."""

    @property
    def attempt(self) -> int: ...
    @property
    def claim_seq(self) -> int: ...
    @property
    def outcome(self) -> str: ...
    @property
    def worker_id(self) -> str | None: ...
    @property
    def host(self) -> str | None: ...
    @property
    def claimed_at(self) -> datetime: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def finished_at(self) -> datetime: ...
    @property
    def run_seconds(self) -> float | None: ...
    @property
    def wait_seconds(self) -> float | None: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def traceback(self) -> str | None: ...


def attempt_json(info: Attempt) -> dict[str, Any]:
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


class Timings(Protocol):
    """What the API reads of a queue's timings (the backends' ``QueueTimings``)."""

    @property
    def attempts(self) -> int: ...
    @property
    def run_p50(self) -> float | None: ...
    @property
    def run_p95(self) -> float | None: ...
    @property
    def run_p99(self) -> float | None: ...
    @property
    def wait_p50(self) -> float | None: ...
    @property
    def wait_p95(self) -> float | None: ...
    @property
    def wait_p99(self) -> float | None: ...


def timings_json(queue: str, window: int, info: Timings | None) -> dict[str, Any]:
    """A queue's run time and wait percentiles over ``window`` seconds (None: no attempt
    finished in it, so every percentile is null)."""
    names = ("run_p50", "run_p95", "run_p99", "wait_p50", "wait_p95", "wait_p99")
    return {
        "queue": queue,
        "window": window,
        "attempts": 0 if info is None else info.attempts,
    } | {name: None if info is None else getattr(info, name) for name in names}


class Bucket(Protocol):
    """What the API reads of a history bucket (the backends' ``AttemptBucket``)."""

    @property
    def start(self) -> datetime: ...
    @property
    def succeeded(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def cancelled(self) -> int: ...
    @property
    def run_p50(self) -> float | None: ...
    @property
    def run_p95(self) -> float | None: ...
    @property
    def wait_p50(self) -> float | None: ...
    @property
    def wait_p95(self) -> float | None: ...


def bucket_json(info: Bucket) -> dict[str, Any]:
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
