"""The attempts table on PostgreSQL (docs/protocol.rst §14, migration 0009): the parameters
the outcome statements send for it, and the operator's reads of it.

The rows themselves are written by queries.sql's ``claim``, ``fail`` and ``release``, in
the statement that ends the attempt; a succeeded attempt is the job's row, which ``ack``
finishes (the view ``attempt_rows`` reads both). This module only builds the extra
arrays those statements take (the handler's timing, the error's type and traceback) and
turns the reads' rows into :mod:`trioqueue._operator_types` values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from trioqueue._backends.validation import timing_values
from trioqueue._core.tracebacks import bound_traceback
from trioqueue._operator_types import AttemptBucket, AttemptInfo, QueueTimings
from trioqueue._types import Ack, AttemptTiming, ChildWaitWrite, Failure, Release, SnoozeWrite

__all__ = [
    "attempt_buckets",
    "attempt_infos",
    "failure_texts",
    "queue_timings",
    "timing_arrays",
]

_INF = math.inf


def timing_arrays(
    items: Sequence[Ack | Failure | Release | SnoozeWrite | ChildWaitWrite],
) -> tuple[str | None, str | None]:
    """Each item's handler start and run time as two float8[] literals, sent as text
    parameters (queries.sql, ``ack``); None (SQL NULL) for both when no item has a
    timing, as the progress array is sent (``arguments.py``).

    On the hot path (every ack of a drain): one pass, and a worker's usual timing (an
    AttemptTiming of two positive finite floats) costs two ``repr`` and no validation
    call; anything else goes through ``timing_values``, which never raises. One literal
    rather than a text[] of one element per item: asyncpg checks each element of an
    array parameter in Python."""
    starts: list[str] = []
    runs: list[str] = []
    timed = False
    for item in items:
        timing = item.timing
        if timing is None:
            starts.append("NULL")
            runs.append("NULL")
            continue
        timed = True
        if type(timing) is AttemptTiming:
            started, run = timing.started_after, timing.run_seconds
            # (type() is: no abc isinstance; the chained compare rejects NaN and inf.)
            if (
                type(started) is float
                and type(run) is float
                and 0.0 < started < _INF
                and 0.0 < run < _INF
            ):
                starts.append(repr(started))
                runs.append(repr(run))
                continue
        checked_start, checked_run = timing_values(timing)
        starts.append(_literal(checked_start))
        runs.append(_literal(checked_run))
    if not timed:
        return None, None
    return "{" + ",".join(starts) + "}", "{" + ",".join(runs) + "}"


def failure_texts(
    items: Sequence[Failure], storable: Callable[[str], str]
) -> tuple[list[str | None], list[str | None]]:
    """Each failure's error type and traceback as text[] parameters, made storable (no
    NUL, no lone surrogate) by ``storable`` and the traceback bounded after that, since
    escaping lengthens it (docs/protocol.rst §14)."""
    types = [None if f.error_type is None else storable(f.error_type) for f in items]
    tracebacks = [
        None if f.traceback is None else bound_traceback(storable(f.traceback)) for f in items
    ]
    return types, tracebacks


def _literal(value: float | None) -> str:
    """A checked value (finite, or None) as an element of a float8[] literal."""
    return "NULL" if value is None else repr(value)


def attempt_infos(job_id: int, rows: Sequence[Any]) -> list[AttemptInfo] | None:
    """``list_attempts``' rows as AttemptInfos; None for an unknown job (no row)."""
    if not rows:
        return None
    return [_attempt_info(job_id, row) for row in rows if row["claim_seq"] is not None]


def _attempt_info(job_id: int, row: Any) -> AttemptInfo:
    return AttemptInfo(
        job_id=job_id,
        attempt=row["attempt"],
        claim_seq=row["claim_seq"],
        outcome=row["outcome"],
        worker_id=row["worker_id"],
        host=row["host"],
        claimed_at=row["claimed_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        run_seconds=row["run_seconds"],
        wait_seconds=row["wait_seconds"],
        error_type=row["error_type"],
        error=row["error"],
        traceback=row["traceback"],
    )


def queue_timings(rows: Sequence[Any]) -> dict[str, QueueTimings]:
    return {
        row["queue"]: QueueTimings(
            queue=row["queue"],
            attempts=row["attempts"],
            run_p50=row["run_p50"],
            run_p95=row["run_p95"],
            run_p99=row["run_p99"],
            wait_p50=row["wait_p50"],
            wait_p95=row["wait_p95"],
            wait_p99=row["wait_p99"],
        )
        for row in rows
    }


def attempt_buckets(rows: Sequence[Any]) -> list[AttemptBucket]:
    return [
        AttemptBucket(
            start=row["start"],
            succeeded=row["succeeded"],
            failed=row["failed"],
            cancelled=row["cancelled"],
            run_p50=row["run_p50"],
            run_p95=row["run_p95"],
            wait_p50=row["wait_p50"],
            wait_p95=row["wait_p95"],
        )
        for row in rows
    ]
