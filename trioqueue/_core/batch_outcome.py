"""What a batch handler answers for each job of its batch (docs/protocol.rst §20).

A batch handler runs a whole claimed batch in one call and answers one outcome per job:
:class:`JobSucceeded`, :class:`JobFailed`, :class:`JobRetry` or a ``Snooze``
(docs/protocol.rst §17). This module reads that
answer, sans-IO: :func:`read_answer` says which outcome each job got, or why the answer as
a whole is unusable (then every job of the batch fails, charged, with that reason). A job
the answer leaves out fails on its own (:func:`missing_message`).

The outcomes are the handler's word only: a stop of the job (a cancel, a lost row) or of
its batch (lease fence, max_job_duration, shutdown) decides first, as for any attempt
(invariant I8), whatever the answer says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, final

from trioqueue._core.snooze import MAX_SNOOZE_SECONDS, Snooze

__all__ = [
    "BatchAnswer",
    "BatchOutcome",
    "JobFailed",
    "JobRetry",
    "JobSucceeded",
    "missing_message",
    "read_answer",
]

#: The longest retry delay, in seconds (about a century, what a backend stores).
MAX_RETRY_DELAY = MAX_SNOOZE_SECONDS
#: ``last_error`` of a :class:`JobRetry` that gives no error of its own.
RETRY_REQUESTED = "retry requested by the batch handler"


def _check_error(owner: str, error: object) -> None:
    if not isinstance(error, str | Exception):
        raise TypeError(f"{owner}.error must be a str or an Exception, not {type(error).__name__}")


@final
@dataclass(frozen=True, slots=True)
class JobSucceeded:
    """The job succeeded; ``result`` (JSON, or None) is stored as ``JobInfo.result``."""

    result: Any = None


@final
@dataclass(frozen=True, slots=True)
class JobFailed:
    """The job failed, charged: retried after the pool's backoff while attempts remain,
    else ``failed`` (as a raised exception is). An exception's type and traceback are
    stored with it, as for one a handler raises.

    Raises:
        TypeError: ``error`` is neither a str nor an Exception.
    """

    error: str | Exception

    def __post_init__(self) -> None:
        _check_error("JobFailed", self.error)


@final
@dataclass(frozen=True, slots=True)
class JobRetry:
    """The job failed, charged, and runs again after ``delay`` seconds rather than the
    pool's backoff, while attempts remain; on its last attempt it is ``failed``.

    Raises:
        TypeError: ``delay`` is not a number, or ``error`` neither a str nor an Exception.
        ValueError: ``delay`` is negative, not finite, or over about a century.
    """

    delay: float
    error: str | Exception = RETRY_REQUESTED

    def __post_init__(self) -> None:
        delay: object = self.delay
        if not isinstance(delay, int | float) or isinstance(delay, bool):
            raise TypeError(f"JobRetry.delay must be a number of seconds, not {delay!r}")
        if not (math.isfinite(delay) and 0 <= delay <= MAX_RETRY_DELAY):
            raise ValueError(
                f"JobRetry.delay must be a number >= 0 and <= {MAX_RETRY_DELAY:.0f}, not {delay!r}"
            )
        _check_error("JobRetry", self.error)


#: One job's outcome, as a batch handler answers it (a ``Snooze``: docs/protocol.rst §17).
BatchOutcome: TypeAlias = JobSucceeded | JobFailed | JobRetry | Snooze
#: A batch handler's answer: by job id, or one outcome per job in the batch's order.
BatchAnswer: TypeAlias = Mapping[int, BatchOutcome] | Sequence[BatchOutcome]

_OUTCOMES = (JobSucceeded, JobFailed, JobRetry, Snooze)
_EXPECTED = (
    "expected a mapping {job id: outcome} or a sequence of one outcome per job, "
    "each JobSucceeded, JobFailed, JobRetry or Snooze"
)


def missing_message(job_id: int) -> str:
    """``last_error`` of a job the batch handler's answer left out."""
    return f"the batch handler returned no outcome for job {job_id}"


def unusable_message(problems: Sequence[str]) -> str:
    """``last_error`` of every job of a batch whose handler's answer is unusable."""
    return f"the batch handler's answer is unusable: {'; '.join(problems)} ({_EXPECTED})"


def read_answer(
    answer: object, job_ids: Sequence[int]
) -> tuple[dict[int, BatchOutcome], str | None]:
    """The outcome the answer gives each job, by id (jobs left out are missing), or, when
    the answer is unusable, nothing and the ``last_error`` naming every problem found.

    Usable: a mapping whose keys are job ids of the batch, or a sequence (not a string)
    of exactly one item per job in the batch's order; every value an outcome. A mapping
    may leave jobs out; a sequence may not (which job an item is for is its position).
    """
    if isinstance(answer, Mapping):
        pairs = list(answer.items())
        known = set(job_ids)
        problems = [
            f"{key!r} is not a job id of this batch" for key, _ in pairs if key not in known
        ]
    elif isinstance(answer, Sequence) and not isinstance(answer, str | bytes | bytearray):
        pairs = list(zip(job_ids, answer, strict=False))
        problems = []
        if len(answer) != len(job_ids):
            problems.append(f"{len(answer)} outcome(s) for {len(job_ids)} job(s)")
    else:
        return {}, unusable_message([f"it is {type(answer).__name__}"])
    problems += [
        f"the outcome for job {key!r} is {type(value).__name__}"
        for key, value in pairs
        if not isinstance(value, _OUTCOMES)
    ]
    if problems:
        return {}, unusable_message(problems)
    return dict(pairs), None
