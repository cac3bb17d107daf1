"""Argument checks shared by the backends, so both refuse the same inputs the same way.

Every check runs before anything is written: a backend validates a whole request first and
only then touches its store, so a bad argument never leaves a partial write behind.
Payloads are encoded to JSON text here, and the text is what a backend stores. The rules
follow what PostgreSQL can hold: ``jsonb`` has no NaN or infinity, and its strings (like
``text`` columns) can hold neither NUL characters nor lone surrogates.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trioqueue import _telemetry
from trioqueue._backends.cursors import Cursor, read_cursor
from trioqueue._core.clock_skew import ClockVerdict
from trioqueue._core.schedule import check_cron, check_timezone
from trioqueue._core.wire import RenewItem
from trioqueue._types import (
    JOB_SORTS,
    JOB_STATUSES,
    ON_DUPLICATE,
    Ack,
    ChildWaitWrite,
    EnqueueOutcome,
    Failure,
    JobSort,
    JobStatus,
    OnDuplicate,
    PoolBeat,
    PoolRegistration,
    Release,
    SnoozeWrite,
)

#: Longest queue name, in characters (at most 512 bytes of UTF-8, so a queue name and a
#: dedup key together stay well inside one btree index entry; see MAX_DEDUP_KEY_BYTES).
MAX_QUEUE_LENGTH = 128

#: Longest ``dedup_key``, in bytes of UTF-8. PostgreSQL's unique index on (queue,
#: dedup_key) cannot hold an entry over 2704 bytes (a third of a page); 1024 bytes plus
#: the longest queue name leaves room to spare, and holds any hash or natural key.
MAX_DEDUP_KEY_BYTES = 1024
#: Highest ``max_per_second`` a queue may have (claims per second): far above any real rate.
MAX_RATE = 1e6
#: Longest result, in bytes of its JSON text (docs/usage.rst, "Results"): it rides in the
#: batched ack statement and in the dashboard's job JSON, far below jsonb's 256 MB.
MAX_RESULT_BYTES = 16 * 1024 * 1024
#: Longest checkpoint, in bytes of its JSON text (docs/protocol.rst §16): it rides in the
#: shared renewal statement of every job of a pool, so it stays small.
MAX_CHECKPOINT_BYTES = 64 * 1024

#: Largest page ``list_jobs`` returns.
MAX_LIST_LIMIT = 10_000

#: Longest ``search`` text of ``list_jobs`` / ``count_jobs``, in characters.
MAX_SEARCH_LENGTH = 1000

#: Most buckets ``finished_history`` answers.
MAX_HISTORY_BUCKETS = 1000

#: Longest worker id, host name; and the largest pid, concurrency or counter a pool reports.
MAX_WORKER_TEXT = 1024
INT64_MAX = 2**63 - 1

#: Range of ``priority`` and ``max_attempts``: PostgreSQL ``integer`` columns hold 32 bits.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

#: Longest delay, retry delay or lease, in seconds: about a century, far beyond any real use
#: and well inside what a timestamp holds.
MAX_SECONDS = 100 * 365.25 * 86400


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """A validated enqueue: the payloads already encoded as JSON text."""

    queue: str
    payloads: tuple[str, ...]
    priority: int
    delay: float
    max_attempts: int
    dedup_key: str | None
    group: str | None = None
    #: The trace context active at enqueue, as JSON text (docs/protocol.rst §14); None
    #: without OpenTelemetry.
    trace_context: str | None = None


def check_enqueue(
    queue: object,
    payloads: Sequence[Any],
    *,
    priority: object,
    delay: object,
    max_attempts: object,
    dedup_key: object,
    group: object = None,
) -> EnqueueRequest:
    """Validate every argument of ``enqueue``/``enqueue_many`` and encode the payloads.

    Raises:
        TypeError: an argument has the wrong type, or a payload is not JSON-serialisable.
        ValueError: an argument is out of range, or ``dedup_key`` is given with several
            payloads (they would all share it).
    """
    if isinstance(payloads, str | bytes | bytearray) or not isinstance(payloads, Sequence):
        raise TypeError(f"payloads must be a sequence (a list), not {type(payloads).__name__}")
    if dedup_key is not None and len(payloads) > 1:
        raise ValueError("dedup_key cannot be used with more than one payload: all would share it")
    return EnqueueRequest(
        queue=check_queue(queue),
        payloads=tuple(encode_payload(payload) for payload in payloads),
        priority=check_int("priority", priority, minimum=INT32_MIN, maximum=INT32_MAX),
        delay=_check_delay(delay),
        max_attempts=check_int("max_attempts", max_attempts, minimum=1, maximum=INT32_MAX),
        dedup_key=_check_key("dedup_key", dedup_key, "use None for no deduplication"),
        group=_check_key("group", group, "use None for no group"),
        trace_context=encode_trace_context(_telemetry.enqueue_context()),
    )


def encode_trace_context(context: Mapping[str, str] | None) -> str | None:
    """The trace context to store with a job, as JSON text: only its string keys and
    values a database can hold (a propagator's carrier holds nothing else); None for none
    or an empty one. Never raises: tracing must not refuse an enqueue."""
    if not context:
        return None
    kept = {
        k: v
        for k, v in context.items()
        if isinstance(k, str)
        and isinstance(v, str)
        and _text_problem(k) is None
        and _text_problem(v) is None
    }
    return json.dumps(kept, sort_keys=True) if kept else None


def decode_trace_context(text: str | None) -> Mapping[str, str] | None:
    """A stored trace context (JSON text of string pairs), or None."""
    return None if text is None else dict(json.loads(text))


#: Characters a name (a queue's, a schedule's) may not hold (docs/usage.rst, "Enqueue jobs"):
#: C0 and C1 controls and DEL, which move a terminal's cursor, start its escape sequences
#: or forge lines (and HTML turns a CR into a LF, so the name a page holds is another);
#: bidirectional formatting (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which
#: reorders what follows it (``"\u202eliam"`` shows as ``mail``); the line and paragraph
#: separators U+2028 and U+2029; and the invisible U+200B, U+2060 and U+FEFF, which make
#: two names look alike. A name is an identifier people read, in logs, terminals and the
#: dashboard: none of these has a use in one. Scripts written right to left need no
#: formatting characters to show right, and the zero-width (non-)joiners that some scripts
#: and emoji need (U+200C, U+200D) stay allowed.
_UNSAFE_IN_NAME = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]"
)


def check_queue(queue: object) -> str:
    """A queue name: a non-empty ``str`` of at most 128 characters a database can store,
    with no control, bidirectional formatting or invisible character (:data:`_UNSAFE_IN_NAME`).

    Every call that names a queue checks this: enqueue, claims and pools, pause, resume,
    limits and schedules. The filters that only read (:func:`check_filters`) take any name
    a database can store, so jobs stored under such a name by an earlier release can still
    be found, and deleted.
    """
    return _check_name("queue", queue, MAX_QUEUE_LENGTH, strict=True)


def check_queue_filter(queue: object) -> str:
    """A queue name to read by (``list_jobs``, ``count_jobs``, ``finished_history``): any
    non-empty ``str`` of at most 128 characters a database can store."""
    return _check_name("queue", queue, MAX_QUEUE_LENGTH, strict=False)


def _check_name(what: str, value: object, maximum: int, *, strict: bool) -> str:
    """A name (a queue's, a schedule's): a non-empty ``str`` of at most ``maximum``
    characters that a database can store; with ``strict``, and none of the characters
    of :data:`_UNSAFE_IN_NAME`."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    if len(value) > maximum:
        raise ValueError(f"{what} must be at most {maximum} characters, not {len(value)}")
    problem = _text_problem(value)
    if problem:
        raise ValueError(f"{what} must not contain {problem}")
    unsafe = _UNSAFE_IN_NAME.search(value) if strict else None
    if unsafe is not None:
        raise ValueError(
            f"{what} must not contain control, bidirectional formatting or invisible "
            f"characters (U+{ord(unsafe.group()):04X} at position {unsafe.start()}): "
            "they show differently, or not at all, in terminals, logs and the dashboard"
        )
    return value


def encode_payload(payload: object) -> str:
    """The JSON text of ``payload``; a ``TypeError`` names the reason it has none."""
    return _encode_json("payload", payload)


def encode_result(result: object) -> str | None:
    """The JSON text of a handler's return value, None for None (nothing to store).

    Raises:
        TypeError: ``result is not JSON-serialisable: ...`` (the attempt then fails).
    """
    if result is None:
        return None
    text = _encode_json("result", result)
    # A UTF-8 character is at most 4 bytes: most results need no byte count at all.
    if len(text) > MAX_RESULT_BYTES // 4 and len(text.encode()) > MAX_RESULT_BYTES:
        raise TypeError(
            f"result is not JSON-serialisable: its JSON text is {len(text.encode())} bytes, "
            f"over the {MAX_RESULT_BYTES} a result may have"
        )
    return text


def encode_checkpoint(value: object) -> str:
    """The JSON text of a checkpoint (``ctx.checkpoint``), at most MAX_CHECKPOINT_BYTES.

    Raises:
        TypeError: ``checkpoint is not JSON-serialisable: ...``.
        ValueError: its JSON text is longer than MAX_CHECKPOINT_BYTES.
    """
    text = _encode_json("checkpoint", value)
    problem = _checkpoint_size_problem(text)
    if problem:
        raise ValueError(f"checkpoint {problem}")
    return text


def check_checkpoint_texts(
    items: Iterable[RenewItem | Ack | Failure | Release | SnoozeWrite | ChildWaitWrite],
) -> None:
    """What a renewal or an outcome write carries as checkpoints must be storable: a JSON
    text, at most MAX_CHECKPOINT_BYTES (the runtime encodes them so; a backend never stores
    anything else).

    Raises:
        ValueError: naming every item whose checkpoint is not (nothing is written).
    """
    problems = [
        f"job {item.job_id}: {problem}"
        for item in items
        if item.checkpoint is not None
        and (problem := _checkpoint_text_problem(item.checkpoint)) is not None
    ]
    if problems:
        raise ValueError("bad checkpoint text: " + "; ".join(problems))


def _checkpoint_text_problem(text: object) -> str | None:
    if not isinstance(text, str):
        return f"a checkpoint must be JSON text (a str), not {type(text).__name__}"
    size = _checkpoint_size_problem(text)
    if size:
        return f"the checkpoint {size}"
    try:
        problem = _payload_text_problem(decode_payload(text))
    except (ValueError, RecursionError) as exc:
        return f"the checkpoint is not JSON ({type(exc).__name__}: {exc})"
    return None if problem is None else f"the checkpoint contains {problem}"


def _checkpoint_size_problem(text: str) -> str | None:
    # A UTF-8 character is at most 4 bytes: most checkpoints need no byte count at all.
    if len(text) > MAX_CHECKPOINT_BYTES // 4 and len(text.encode()) > MAX_CHECKPOINT_BYTES:
        return (
            f"is {len(text.encode())} bytes of JSON, over the {MAX_CHECKPOINT_BYTES} "
            "a checkpoint may have"
        )
    return None


#: One encoder and one decoder for every payload and result. ``json.dumps`` with an option
#: builds an encoder per call, and ``json.loads`` strips whitespace around the text with
#: two regular-expression matches; together they cost more than the JSON of a small
#: payload itself (docs/performance.rst). Both objects keep no state between calls.
_ENCODER = json.JSONEncoder(allow_nan=False)
_DECODER = json.JSONDecoder()


def _encode_json(what: str, value: object) -> str:
    try:
        text = _ENCODER.encode(value)
    except ValueError as exc:
        # json says ValueError for NaN/infinity and circular references; to the caller
        # both mean "this is not a JSON value", which the API reports as TypeError.
        raise TypeError(f"{what} is not JSON-serialisable: {_json_reason(exc)}") from exc
    except (TypeError, RecursionError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from exc
    problem = _payload_text_problem(decode_payload(text))
    if problem:
        raise TypeError(f"{what} is not storable as JSON: a string contains {problem}")
    return text


def decode_payload(text: str) -> Any:
    """A fresh copy of a stored payload, so no two readers share (or can mutate) one.

    Raises:
        ValueError: ``text`` is not JSON (as ``json.loads`` says it).
    """
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        end = -1
    if end == len(text):
        return value
    # Whitespace around the value (stored text has none), or no JSON: json.loads has the
    # answer, or the error.
    return json.loads(text)


def check_job_id(job_id: object) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise TypeError(f"job_id must be an int, not {type(job_id).__name__}")
    return job_id


def check_job_ids(job_ids: object) -> list[int]:
    """``get_jobs``' ids: a sequence of at most :data:`MAX_LIST_LIMIT` ints, each once."""
    if isinstance(job_ids, str | bytes | bytearray) or not isinstance(job_ids, Sequence):
        raise TypeError(f"job_ids must be a sequence of ints, not {type(job_ids).__name__}")
    if len(job_ids) > MAX_LIST_LIMIT:
        raise ValueError(f"job_ids may name at most {MAX_LIST_LIMIT} jobs, not {len(job_ids)}")
    return list(dict.fromkeys(check_job_id(job_id) for job_id in job_ids))


def check_preview(preview: object) -> int | None:
    """``list_jobs``' and ``get_jobs``' ``preview``: None (whole texts) or an int >= 0."""
    return None if preview is None else check_int("preview", preview, minimum=0, maximum=INT32_MAX)


def check_list_jobs(
    queue: object, status: object, limit: object, offset: object
) -> tuple[str | None, JobStatus | None, int, int]:
    """Validate ``list_jobs`` arguments: ``(queue, status, limit, offset)``."""
    if queue is not None:
        queue = check_queue_filter(queue)
    if status is not None and status not in JOB_STATUSES:
        raise ValueError(f"status must be one of {', '.join(JOB_STATUSES)} or None, not {status!r}")
    limit = check_int("limit", limit, minimum=1, maximum=MAX_LIST_LIMIT)
    offset = check_int("offset", offset, minimum=0)
    return queue, _as_status(status), limit, offset


def check_search(search: object) -> str | None:
    """A ``search`` text: None, or a str of at most 1000 characters a database can hold."""
    if search is None:
        return None
    if not isinstance(search, str):
        raise TypeError(f"search must be a str or None, not {type(search).__name__}")
    if len(search) > MAX_SEARCH_LENGTH:
        raise ValueError(
            f"search must be at most {MAX_SEARCH_LENGTH} characters, not {len(search)}"
        )
    problem = _text_problem(search)
    if problem:
        raise ValueError(f"search must not contain {problem}")
    return search


def check_sort(sort: object) -> JobSort:
    for known in JOB_SORTS:
        if sort == known:
            return known
    raise ValueError(f"sort must be one of {', '.join(JOB_SORTS)}, not {sort!r}")


def check_cursors(
    after: object, before: object, sort: JobSort
) -> tuple[Cursor | None, Cursor | None]:
    """``list_jobs``' ``after`` and ``before`` cursors, decoded for ``sort``; at most one."""
    if after is not None and before is not None:
        raise ValueError("give after or before, not both")
    start = None if after is None else read_cursor(after, sort)
    end = None if before is None else read_cursor(before, sort)
    return start, end


def check_search_window(window: object) -> int | None:
    """``search_window``: None (search every job) or how many of the newest jobs (>= 1)."""
    return None if window is None else check_int("search_window", window, minimum=1)


def check_filters(
    queue: object, status: object, search: object
) -> tuple[str | None, JobStatus | None, str | None]:
    """Validate the filters of ``list_jobs`` and ``count_jobs``: ``(queue, status, search)``."""
    if queue is not None:
        queue = check_queue_filter(queue)
    if status is not None and status not in JOB_STATUSES:
        raise ValueError(f"status must be one of {', '.join(JOB_STATUSES)} or None, not {status!r}")
    return queue, _as_status(status), check_search(search)


def timing_values(timing: object) -> tuple[float | None, float | None]:
    """An outcome's ``(started_after, run_seconds)`` as the attempts table stores them:
    finite and at least 0, None where unknown. Never raises: a worker's odd measurement
    must not keep its outcome from being written (docs/protocol.rst §14)."""
    started = getattr(timing, "started_after", None)
    run = getattr(timing, "run_seconds", None)
    return _seconds_or_none(started), _seconds_or_none(run)


def _seconds_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return max(0.0, value) if math.isfinite(value) else None


def check_cancelled(cancelled: object, status: JobStatus | None) -> bool | None:
    """The ``cancelled`` filter of ``list_jobs``/``count_jobs``: None, or a bool with
    ``status`` None or ``"failed"`` (only a failed job is a cancellation)."""
    if cancelled is None:
        return None
    if not isinstance(cancelled, bool):
        raise TypeError(f"cancelled must be a bool or None, not {type(cancelled).__name__}")
    if status not in (None, "failed"):
        raise ValueError(
            f"cancelled applies to failed jobs: use it with status 'failed' or None, not {status!r}"
        )
    return cancelled


def check_history(window: object, buckets: object, queue: object) -> tuple[float, int, str | None]:
    """Validate ``finished_history`` arguments: ``(window, buckets, queue)``."""
    window = check_timeout("window", window)
    buckets = check_int("buckets", buckets, minimum=1, maximum=MAX_HISTORY_BUCKETS)
    return window, buckets, None if queue is None else check_queue_filter(queue)


def check_worker_id(worker_id: object) -> str:
    return _check_worker_text("worker_id", worker_id)


def check_registration(pool: object) -> PoolRegistration:
    """A pool's registration, with every field a database can store."""
    if not isinstance(pool, PoolRegistration):
        raise TypeError(f"pool must be a PoolRegistration, not {type(pool).__name__}")
    check_worker_id(pool.worker_id)
    _check_worker_text("host", pool.host)
    check_queue(pool.queue)
    check_int("pid", pool.pid, minimum=0, maximum=INT32_MAX)
    check_int("concurrency", pool.concurrency, minimum=1, maximum=INT32_MAX)
    check_timeout("heartbeat_interval", pool.heartbeat_interval)
    return pool


def check_beat(beat: object) -> PoolBeat | None:
    if beat is None:
        return None
    if not isinstance(beat, PoolBeat):
        raise TypeError(f"beat must be a PoolBeat or None, not {type(beat).__name__}")
    check_registration(beat.pool)
    check_int("in_flight", beat.in_flight, minimum=0, maximum=INT32_MAX)
    check_int("abandoned_renewals", beat.abandoned_renewals, minimum=0, maximum=INT64_MAX)
    _check_clock(beat.clock_skew, beat.clock_verdict)
    return beat


#: The clock verdicts a beat may report: :class:`ClockVerdict`'s labels.
CLOCK_VERDICTS = tuple(verdict.label for verdict in ClockVerdict)


def _check_clock(skew: object, verdict: object) -> None:
    """A beat's clock fields: both None (not measured), or a finite skew and a verdict."""
    if skew is None and verdict is None:
        return
    if isinstance(skew, bool) or not isinstance(skew, int | float) or not math.isfinite(skew):
        raise ValueError(f"clock_skew must be a finite number of seconds, not {skew!r}")
    if verdict not in CLOCK_VERDICTS:
        raise ValueError(
            f"clock_verdict must be one of {', '.join(CLOCK_VERDICTS)}, not {verdict!r}"
        )


def _check_worker_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value or len(value) > MAX_WORKER_TEXT:
        raise ValueError(f"{name} must have 1 to {MAX_WORKER_TEXT} characters, not {len(value)}")
    problem = _text_problem(value)
    if problem:
        raise ValueError(f"{name} must not contain {problem}")
    return value


def check_claim(
    queue: object,
    limit: object,
    worker_id: object,
    visibility_timeout: object,
    quarantine_after: object = None,
    alone: object = False,
) -> None:
    check_queue(queue)
    check_int("limit", limit, minimum=1)
    if not isinstance(worker_id, str):
        raise TypeError(f"worker_id must be a str, not {type(worker_id).__name__}")
    check_timeout("visibility_timeout", visibility_timeout)
    if quarantine_after is not None:
        check_int("quarantine_after", quarantine_after, minimum=1, maximum=INT32_MAX)
    if not isinstance(alone, bool):
        raise TypeError(f"alone must be True or False, not {type(alone).__name__}")


def check_renew_items(items: Iterable[RenewItem]) -> tuple[RenewItem, ...]:
    """A renewal names each job once: it answers one verdict per job.

    Raises:
        ValueError: a job is named twice (nothing is renewed).
    """
    items = tuple(items)
    seen: set[int] = set()
    for item in items:
        if item.job_id in seen:
            raise ValueError(f"a renewal names job {item.job_id} more than once")
        seen.add(item.job_id)
    return items


def check_timeout(name: str, value: object) -> float:
    """A duration that must be finite and positive (a lease length)."""
    return check_seconds(name, value, minimum=0.0, zero_ok=False)


def check_seconds(name: str, value: object, *, minimum: float = 0.0, zero_ok: bool = True) -> float:
    """A number of seconds: finite, at most :data:`MAX_SECONDS`, and at least ``minimum``
    (more than it, when ``zero_ok`` is false and ``minimum`` is 0).

    Raises:
        TypeError: ``value`` is not an int or a float (a bool is neither here).
        ValueError: it is out of range; an int too large for a float is too.
    """
    number = _check_number(name, value)
    low = ">=" if zero_ok or minimum > 0 else ">"
    if not (math.isfinite(number) and number <= MAX_SECONDS) or not (
        number >= minimum if low == ">=" else number > minimum
    ):
        raise ValueError(
            f"{name} must be a number {low} {minimum:g} and <= {MAX_SECONDS:.0f}, "
            f"not {_show(value)}"
        )
    return number


def check_age(name: str, value: object) -> float:
    """A number of seconds >= 0 (how long ago, how long to wait)."""
    if value is None:
        raise TypeError(f"{name} must be a number, not None")
    return _check_delay(value, name=name)


def check_snoozes(items: Sequence[SnoozeWrite], max_snoozes: object) -> int:
    """A snooze write's arguments (docs/protocol.rst §17): each item's ``seconds`` a
    number of seconds a backend stores, ``max_snoozes`` an int >= 0 that fits the column.

    Returns:
        ``max_snoozes``.

    Raises:
        TypeError, ValueError: one error naming every problem found (nothing is written);
            a TypeError when every problem is a wrong type.
    """
    problems: list[Exception] = []
    for item in items:
        try:
            check_seconds(f"job {item.job_id}: seconds", item.seconds)
        except (TypeError, ValueError) as exc:
            problems.append(exc)
    try:
        check_int("max_snoozes", max_snoozes, minimum=0, maximum=INT32_MAX)
    except (TypeError, ValueError) as exc:
        problems.append(exc)
    check_checkpoint_texts(items)
    if problems:
        kind = TypeError if all(isinstance(p, TypeError) for p in problems) else ValueError
        raise kind("bad snooze: " + "; ".join(str(p) for p in problems))
    assert isinstance(max_snoozes, int)
    return max_snoozes


def check_retry_delay(value: object) -> float | None:
    if value is None:
        return None
    return _check_delay(value, name="retry_delay")


# -- helpers ------------------------------------------------------------------------------


def _as_status(status: object) -> JobStatus | None:
    for known in JOB_STATUSES:
        if status == known:
            return known
    return None


def check_int(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    # bool is an int subclass, but True as a priority or a limit is a bug, not a number.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {_show(value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {_show(value)}")
    return value


def _check_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        # An int beyond the float range (10**400): out of every range checked here, so it
        # is refused with the range's ValueError rather than float()'s OverflowError.
        return math.inf if value > 0 else -math.inf


def _show(value: object) -> str:
    """``repr(value)`` for an error message: a huge int is described, not printed (its
    digits could fill a screen, and past 4300 of them ``repr`` itself refuses)."""
    if isinstance(value, int) and value.bit_length() > 64:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"an int of about {digits} digits"
    return repr(value)


def _check_delay(value: object, *, name: str = "delay") -> float:
    if value is None:
        return 0.0
    try:
        return check_seconds(name, value)
    except ValueError:
        raise ValueError(
            f"{name} must be None or a number >= 0 and <= {MAX_SECONDS:.0f}, not {_show(value)}"
        ) from None


def _check_key(name: str, value: object, instead: str) -> str | None:
    """A dedup key or group key: None, or a non-empty str that fits an index entry."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{name} must not be empty ({instead})")
    problem = _text_problem(value)
    if problem:
        raise ValueError(f"{name} must not contain {problem}")
    size = len(value.encode("utf-8"))
    if size > MAX_DEDUP_KEY_BYTES:
        raise ValueError(
            f"{name} must be at most {MAX_DEDUP_KEY_BYTES} bytes of UTF-8, not {size} "
            "(hash a longer key)"
        )
    return value


def check_queue_limits(
    max_running: object, max_per_second: object
) -> tuple[int | None, float | None]:
    """``set_queue_limits``' limits: each None (no limit) or positive.

    Raises:
        TypeError, ValueError: naming every limit that is wrong.
    """
    problems: list[TypeError | ValueError] = []
    running: int | None = None
    rate: float | None = None
    if max_running is not None:
        try:
            running = check_int("max_running", max_running, minimum=1, maximum=INT32_MAX)
        except (TypeError, ValueError) as exc:
            problems.append(exc)
    if max_per_second is not None:
        try:
            rate = _check_rate(max_per_second)
        except (TypeError, ValueError) as exc:
            problems.append(exc)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ValueError("; ".join(str(exc) for exc in problems))
    return running, rate


def _check_rate(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"max_per_second must be a number or None, not {type(value).__name__}")
    rate = float(value)
    if not math.isfinite(rate) or rate <= 0 or rate > MAX_RATE:
        raise ValueError(f"max_per_second must be > 0 and at most {MAX_RATE:g}, not {value!r}")
    return rate


def _json_reason(exc: ValueError) -> str:
    if "Out of range float" in str(exc):
        return "NaN and infinity have no JSON form"
    return str(exc)


def _text_problem(text: str) -> str | None:
    """Why PostgreSQL could not store ``text``, or None."""
    if "\x00" in text:
        return "a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        if all("\udc80" <= c <= "\udcff" for c in exc.object[exc.start : exc.end]):
            # How Python passes on command-line bytes that are not UTF-8 (surrogateescape).
            return "bytes that are not valid UTF-8 (a lone surrogate)"
        return "a lone surrogate (not valid Unicode)"
    return None


def _payload_text_problem(value: Any) -> str | None:
    # Iterative, so a deeply nested payload that json accepted cannot overflow the stack.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                return problem
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return None


# -- schedules (docs/scheduling.rst) ---------------------------------------------------------

#: Longest schedule name, in characters.
MAX_SCHEDULE_NAME_LENGTH = 128

#: ``max_attempts`` of a scheduled job when its schedule names none: enqueue's default.
DEFAULT_MAX_ATTEMPTS = 10


@dataclass(frozen=True, slots=True)
class ScheduleRequest:
    """A validated ``set_schedule``: the payload already encoded as JSON text, the cron
    expression normalised (single spaces)."""

    name: str
    queue: str
    cron: str
    timezone: str
    payload: str
    priority: int
    max_attempts: int


def check_schedule(
    name: object,
    queue: object,
    cron: object,
    payload: object,
    *,
    timezone: object,
    priority: object,
    max_attempts: object,
) -> ScheduleRequest:
    """Validate every argument of ``set_schedule``, reporting every problem at once.

    Raises:
        TypeError: an argument has the wrong type, or the payload is not JSON-serialisable
            (every such problem, one per line).
        ValueError: otherwise, every argument out of range or unknown (a bad cron field,
            an unknown time zone, ...), one per line.
    """
    checks: dict[str, Callable[[], Any]] = {
        "name": lambda: _check_name("name", name, MAX_SCHEDULE_NAME_LENGTH, strict=True),
        "queue": lambda: check_queue(queue),
        "cron": lambda: check_cron(cron),
        "timezone": lambda: check_timezone(timezone),
        "payload": lambda: encode_payload(payload),
        "priority": lambda: check_int("priority", priority, minimum=INT32_MIN, maximum=INT32_MAX),
        "max_attempts": lambda: (
            DEFAULT_MAX_ATTEMPTS
            if max_attempts is None
            else check_int("max_attempts", max_attempts, minimum=1, maximum=INT32_MAX)
        ),
    }
    values: dict[str, Any] = {}
    type_errors: list[str] = []
    value_errors: list[str] = []
    for field_name, run_check in checks.items():
        try:
            values[field_name] = run_check()
        except TypeError as exc:
            type_errors.append(str(exc))
        except ValueError as exc:
            value_errors.append(str(exc))
    if type_errors:
        raise TypeError("\n".join(type_errors))
    if value_errors:
        raise ValueError("\n".join(value_errors))
    return ScheduleRequest(**values)


def check_schedule_name(name: object) -> str:
    """A schedule's name to look up (delete): a non-empty ``str`` of at most 128 characters
    a database can store. :func:`check_schedule` holds a new name to the rules of a queue's
    (:func:`check_queue`)."""
    return _check_name("name", name, MAX_SCHEDULE_NAME_LENGTH, strict=False)


def check_on_duplicate(on_duplicate: object, *, dedup_key: object, delay: object) -> OnDuplicate:
    """``enqueue``'s ``on_duplicate`` policy (docs/protocol.rst §18), checked with what it
    needs: a policy other than ``keep`` acts on a dedup key's holder, so it needs a
    ``dedup_key``; ``debounce`` pushes the holder's run time back by ``delay``, so it needs a
    delay > 0. (The key and delay themselves are checked by :func:`check_enqueue`.)

    Raises:
        TypeError, ValueError: naming every problem, in one error.
    """
    if on_duplicate == "keep":
        return "keep"
    problems: list[TypeError | ValueError] = []
    if not isinstance(on_duplicate, str):
        problems.append(TypeError(f"on_duplicate must be a str, not {type(on_duplicate).__name__}"))
    elif on_duplicate not in ON_DUPLICATE:
        choices = ", ".join(repr(choice) for choice in ON_DUPLICATE)
        problems.append(
            ValueError(f"on_duplicate must be one of {choices}, not {_show(on_duplicate)}")
        )
    if dedup_key is None:
        problems.append(
            ValueError(
                f"on_duplicate={_show(on_duplicate)} needs a dedup_key (the duplicate it acts on)"
            )
        )
    if on_duplicate == "debounce" and (delay is None or delay == 0):
        problems.append(
            ValueError(
                "on_duplicate='debounce' needs a delay > 0 (how far to push the run time back)"
            )
        )
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ValueError("; ".join(str(exc) for exc in problems))
    return on_duplicate  # type: ignore[return-value]  # one of ON_DUPLICATE, checked above


def revision_outcome(policy: OnDuplicate, changed: bool) -> EnqueueOutcome:
    """What ``revise_duplicate`` did to a dedup key's holder under ``policy`` (not keep):
    the holder ``changed`` (it was waiting), or it is running and nothing changed."""
    if not changed:
        return "running"
    return "replaced" if policy == "replace" else "debounced"


def check_child_waits(items: Sequence[ChildWaitWrite]) -> None:
    """A wait for children's arguments (docs/protocol.rst §22): each policy ``"fail"`` or
    ``"continue"``, each checkpoint storable.

    Raises:
        ValueError: one error naming every problem found (nothing is written).
    """
    check_checkpoint_texts(items)
    problems = [
        f"job {item.job_id}: on_child_failure must be 'fail' or 'continue', "
        f"not {item.on_child_failure!r}"
        for item in items
        if item.on_child_failure not in ("fail", "continue")
    ]
    if problems:
        raise ValueError("; ".join(problems))
