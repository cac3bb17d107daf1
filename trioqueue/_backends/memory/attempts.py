"""The reference model's attempts table: its rows, and the timings read from them
(docs/protocol.rst §14).

Nothing of the lease protocol reads these rows: the model writes one per attempt from the
statements that end attempts (and the claim that takes a lapsed one over), and the
operator's reads (``list_attempts``, ``queue_timings``, ``attempt_history``) come from here.
Percentiles are PostgreSQL's ``percentile_cont``, linear interpolation between the two
closest ranks, computed the way PostgreSQL computes them so that both backends agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from trioqueue._backends.validation import timing_values
from trioqueue._core.tracebacks import bound_traceback
from trioqueue._operator_types import AttemptBucket, AttemptInfo, AttemptOutcome, QueueTimings
from trioqueue._types import AttemptTiming

__all__ = ["AttemptRow", "attempt_buckets", "new_attempt", "percentile_cont", "queue_timings"]


@dataclass(frozen=True, slots=True)
class AttemptRow:
    """One row of the attempts table (model times; ``started_at`` is derived)."""

    job_id: int
    queue: str
    attempt: int
    claim_seq: int
    outcome: AttemptOutcome
    worker_id: str | None
    host: str | None
    claimed_at: float
    finished_at: float
    wait_seconds: float | None
    started_after: float | None = None  # started_at = claimed_at + started_after
    run_seconds: float | None = None
    error_type: str | None = None
    error: str | None = None
    traceback: str | None = None

    def info(self, to_datetime: Callable[[float], datetime]) -> AttemptInfo:
        started = None if self.started_after is None else self.claimed_at + self.started_after
        return AttemptInfo(
            job_id=self.job_id,
            attempt=self.attempt,
            claim_seq=self.claim_seq,
            outcome=self.outcome,
            worker_id=self.worker_id,
            host=self.host,
            claimed_at=to_datetime(self.claimed_at),
            started_at=None if started is None else to_datetime(started),
            finished_at=to_datetime(self.finished_at),
            run_seconds=self.run_seconds,
            wait_seconds=self.wait_seconds,
            error_type=self.error_type,
            error=self.error,
            traceback=self.traceback,
        )


@dataclass(frozen=True, slots=True)
class AttemptStart:
    """What the job's row knows of its current attempt (the claim wrote it)."""

    job_id: int
    queue: str
    attempt: int
    claim_seq: int
    worker_id: str | None
    host: str | None
    claimed_at: float
    wait_seconds: float | None


def new_attempt(
    start: AttemptStart,
    outcome: AttemptOutcome,
    finished_at: float,
    *,
    timing: AttemptTiming | None = None,
    error: str | None = None,
    error_type: str | None = None,
    traceback: str | None = None,
) -> AttemptRow:
    """The row an outcome writes; a traceback longer than the bound is cut again (a
    client may have sent more, docs/protocol.rst §14)."""
    started_after, run_seconds = timing_values(timing)
    return AttemptRow(
        job_id=start.job_id,
        queue=start.queue,
        attempt=start.attempt,
        claim_seq=start.claim_seq,
        outcome=outcome,
        worker_id=start.worker_id,
        host=start.host,
        claimed_at=start.claimed_at,
        finished_at=finished_at,
        wait_seconds=start.wait_seconds,
        started_after=started_after,
        run_seconds=run_seconds,
        error_type=error_type,
        error=error,
        traceback=None if traceback is None else bound_traceback(traceback),
    )


def percentile_cont(values: Sequence[float], fraction: float) -> float | None:
    """PostgreSQL's ``percentile_cont(fraction)`` of ``values`` (sorted here): the value
    at rank ``fraction * (n - 1)``, interpolated linearly between its neighbours; None
    for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    first, second = math.floor(rank), math.ceil(rank)
    low = ordered[first]
    if first == second:
        return low
    return low + (ordered[second] - low) * (rank - first)  # float8_lerp's order


def _counted(rows: Iterable[AttemptRow]) -> list[AttemptRow]:
    """The finished attempts timings count: every outcome but ``lost`` (a lapsed attempt
    told nothing of its run)."""
    return [row for row in rows if row.outcome != "lost"]


def _runs(rows: Sequence[AttemptRow]) -> list[float]:
    return [row.run_seconds for row in rows if row.run_seconds is not None]


def _waits(rows: Sequence[AttemptRow]) -> list[float]:
    return [row.wait_seconds for row in rows if row.wait_seconds is not None]


def queue_timings(
    rows: Iterable[AttemptRow], since: float, queue: str | None
) -> dict[str, QueueTimings]:
    """Per queue (or only ``queue``), the percentiles of the attempts finished at or
    after ``since``; queues with none left out."""
    per_queue: dict[str, list[AttemptRow]] = {}
    for row in _counted(rows):
        if row.finished_at >= since and (queue is None or row.queue == queue):
            per_queue.setdefault(row.queue, []).append(row)
    timings = {}
    for name in sorted(per_queue):
        attempts = per_queue[name]
        runs, waits = _runs(attempts), _waits(attempts)
        timings[name] = QueueTimings(
            queue=name,
            attempts=len(attempts),
            run_p50=percentile_cont(runs, 0.5),
            run_p95=percentile_cont(runs, 0.95),
            run_p99=percentile_cont(runs, 0.99),
            wait_p50=percentile_cont(waits, 0.5),
            wait_p95=percentile_cont(waits, 0.95),
            wait_p99=percentile_cont(waits, 0.99),
        )
    return timings


def attempt_buckets(
    rows: Iterable[AttemptRow],
    since: float,
    window: float,
    buckets: int,
    queue: str | None,
    to_datetime: Callable[[float], datetime],
) -> list[AttemptBucket]:
    """Attempts finished per bucket of ``window / buckets`` seconds from ``since``, as
    ``finished_history`` buckets jobs: one finished later than the window (another
    statement's clock) counts in the last bucket."""
    width = window / buckets
    grouped: list[list[AttemptRow]] = [[] for _ in range(buckets)]
    for row in _counted(rows):
        t = row.finished_at
        if t < since or (queue is not None and row.queue != queue):
            continue
        grouped[min(int((t - since) / width), buckets - 1)].append(row)
    return [_bucket(to_datetime(since + n * width), group) for n, group in enumerate(grouped)]


def _bucket(start: datetime, rows: Sequence[AttemptRow]) -> AttemptBucket:
    runs, waits = _runs(rows), _waits(rows)
    return AttemptBucket(
        start=start,
        succeeded=sum(1 for row in rows if row.outcome == "succeeded"),
        failed=sum(1 for row in rows if row.outcome in ("failed", "retry")),
        cancelled=sum(1 for row in rows if row.outcome == "cancelled"),
        run_p50=percentile_cont(runs, 0.5),
        run_p95=percentile_cont(runs, 0.95),
        wait_p50=percentile_cont(waits, 0.5),
        wait_p95=percentile_cont(waits, 0.95),
    )
