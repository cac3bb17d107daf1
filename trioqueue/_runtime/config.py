"""Worker configuration and its validation (invariant I1).

A :class:`WorkerConfig` is plain data. :func:`check` turns it into the timings the guard
works with, or raises one :class:`ConfigError` that lists *every* violation, so an operator
fixes a bad deployment in one round instead of one error at a time.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from trioqueue._backends.validation import INT32_MAX, MAX_SECONDS, check_queue, check_seconds
from trioqueue._core.backoff import ExponentialBackoff
from trioqueue._core.snooze import DEFAULT_MAX_SNOOZES
from trioqueue._core.timing import Timing, auto_heartbeat
from trioqueue._errors import ConfigError
from trioqueue._types import Job

Handler = Callable[[Any, Any], Any]
"""``async def handler(payload, ctx)`` or a plain ``def`` run in a worker thread."""

BatchHandler = Callable[[Any, Any], Awaitable[Any]]
"""``async def batch_handler(jobs, ctx)``: a whole batch in one call, an outcome per job."""

ClaimHook = Callable[[Job], Awaitable[None]]
UnavailableHook = Callable[[Job, str], Awaitable[None]]
FailedHook = Callable[[Job, str], Awaitable[None]]
RetryHook = Callable[[Job, float], Awaitable[None]]
Backoff = Callable[[int], float]

_HOOKS = (
    "on_job_claimed",
    "on_job_unavailable",
    "on_job_succeeded",
    "on_job_failed",
    "on_job_retry",
)

#: The shortest ``visibility_timeout``, ``heartbeat_interval``, ``poll_interval`` and
#: ``blocking_threshold``, in seconds. Each is a cadence the pool keeps up on its own (one
#: renewal statement per H, one claim per poll interval while idle, one look at the event
#: loop per threshold / 4): at 10 ms that is at most 100 statements a second per pool.
#: Shorter values are below a database round trip under load and only add load (a
#: heartbeat of 1 µs made about 8,800 renewals a second); docs/configuration.rst.
MIN_INTERVAL = 0.01


#: ``WorkerConfig.max_attempts``, kept so that configs naming it still work (docs/api.rst).
DEFAULT_MAX_ATTEMPTS = 10
MAX_ATTEMPTS_UNUSED = (
    "WorkerConfig.max_attempts has no effect and is deprecated: a job gets the attempts it "
    "was enqueued with, enqueue(..., max_attempts=N) (default 10)"
)


@dataclass(frozen=True)
class WorkerConfig:
    """How one worker pool runs. Times are seconds, at most about a century; V, H, the
    poll interval, the blocking threshold, the schedule and maintenance intervals at least
    ``MIN_INTERVAL`` (0.01 s).

    Args:
        handler: ``async def handler(payload, ctx)``, or a plain ``def`` run in a thread.
            Give either it or ``batch_handler``.
        queue: the queue to work on.
        concurrency: batches handled at once.
        batch_size: jobs claimed per batch; they share one lease and one cancel scope.
        visibility_timeout: V, the lease length.
        heartbeat_interval: H, the renewal cadence, or ``"auto"`` for ``max(10, V/3)``.
        max_job_duration: D, the longest claim hooks plus handler may run, or None.
        poll_interval: how often to look for work when no notice arrives.
        max_attempts: deprecated, and without effect: how many attempts a job gets is its
            own ``max_attempts``, set by ``enqueue`` (default 10). Setting it to anything
            else warns (``DeprecationWarning``).
        shutdown_grace: on shutdown, how long running handlers may go on.
        backoff: ``backoff(attempt) -> seconds`` before a failed attempt is retried.
        transactional: give handlers ``ctx.connection`` inside the ack's transaction.
        blocking_threshold: an async handler step longer than this is logged as
            blocking the event loop.
        schedule_interval: how often the pool makes a scheduling pass, enqueueing the
            jobs of schedules that came due (docs/scheduling.rst); None: this pool takes
            no part in scheduling.
        maintenance_interval: how often the pool, while it is the store's maintainer,
            makes a retention pass, pruning the finished jobs past their queue's policy
            (docs/howto/retention.rst); one pool per database is the maintainer, elected
            with a lease of ``visibility_timeout`` renewed every ``heartbeat_interval``.
            None: this pool takes no part in maintenance.
        quarantine_after: a job whose last this many attempts each ended without an
            outcome (its worker died) runs alone, with nothing beside it in the pool, and
            is failed if that run ends so too (docs/protocol.rst §13); None: never.
        batch_handler: ``async def batch_handler(jobs, ctx)``, in place of ``handler``:
            each claimed batch in one call, in one task and one cancel scope, answering
            one outcome per job (docs/howto/batch-handler.rst, docs/protocol.rst §20).
        max_snoozes: how many times a job may snooze (a handler's ``Snooze``: run again
            after a delay, the attempt not charged); a job that snoozed this many times
            and snoozes again fails for good (docs/protocol.rst §17). 0: never.
    """

    handler: Handler | None = None
    queue: str = "default"
    concurrency: int = 1
    batch_size: int = 1
    visibility_timeout: float = 60
    heartbeat_interval: float | Literal["auto"] = 30
    max_job_duration: float | None = None
    poll_interval: float = 5
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    shutdown_grace: float = 30
    backoff: Backoff = field(default_factory=ExponentialBackoff)
    on_job_claimed: ClaimHook | None = None
    on_job_unavailable: UnavailableHook | None = None
    on_job_succeeded: ClaimHook | None = None
    on_job_failed: FailedHook | None = None
    on_job_retry: RetryHook | None = None
    transactional: bool = False
    blocking_threshold: float = 0.5
    schedule_interval: float | None = 5
    quarantine_after: int | None = 2
    maintenance_interval: float | None = 60
    batch_handler: BatchHandler | None = None
    max_snoozes: int = DEFAULT_MAX_SNOOZES

    def __post_init__(self) -> None:
        if self.max_attempts != DEFAULT_MAX_ATTEMPTS:
            # stacklevel 3: past __post_init__ and the dataclass's __init__, to the caller.
            warnings.warn(MAX_ATTEMPTS_UNUSED, DeprecationWarning, stacklevel=3)


def transactional_worker_config(concurrency: int, handler: Handler, **options: Any) -> WorkerConfig:
    """A config whose handlers get ``ctx.connection``, committed together with the ack."""
    return WorkerConfig(handler=handler, concurrency=concurrency, transactional=True, **options)


def check(config: WorkerConfig) -> Timing:
    """Validate ``config`` and return its timings.

    Raises:
        ConfigError: listing every problem found, when there is at least one.
    """
    problems = problems_of(config)
    if problems:
        raise ConfigError(problems)
    return _timing(config)


def problems_of(config: object) -> list[str]:
    """Every violation in ``config``, as sentences (empty when it is valid)."""
    if not isinstance(config, WorkerConfig):
        return [f"expected a WorkerConfig, got {type(config).__name__}"]
    return [
        *_callables(config),
        *_batch_mode(config),
        *_queue(config.queue),
        *_counts(config),
        *_timings(config),
    ]


def is_async_callable(fn: object) -> bool:
    """True for ``async def`` functions, also behind ``functools.partial`` or ``__call__``."""
    return any(inspect.iscoroutinefunction(target) for target in _call_targets(fn))


def _yields(fn: object) -> bool:
    """True for generator functions, async or not: calling one runs none of its body."""
    return any(
        inspect.isasyncgenfunction(target) or inspect.isgeneratorfunction(target)
        for target in _call_targets(fn)
    )


def _call_targets(fn: object) -> Iterator[object]:
    """What runs when ``fn`` is called: the function behind any ``functools.partial``,
    and, for a callable object, its ``__call__`` method."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    yield fn
    if not isinstance(fn, type):  # a class's own __call__ is its instances', not its own
        yield getattr(fn, "__call__", None)  # noqa: B004 - we want the method, not callable()


def _timing(config: WorkerConfig) -> Timing:
    v = float(config.visibility_timeout)
    h = (
        auto_heartbeat(v)
        if config.heartbeat_interval == "auto"
        else float(config.heartbeat_interval)
    )
    d = None if config.max_job_duration is None else float(config.max_job_duration)
    return Timing(visibility_timeout=v, heartbeat_interval=h, max_job_duration=d)


def _callables(config: WorkerConfig) -> list[str]:
    # Fields are read as plain objects: a config is often built from untyped settings.
    handler: object = config.handler
    backoff: object = config.backoff
    found = []
    if handler is None and config.batch_handler is not None:
        pass  # the batch handler's checks: _batch_mode
    elif handler is None:
        found.append("a handler is required: give handler (or batch_handler)")
    elif not callable(handler):
        found.append("handler must be callable")
    elif _yields(handler):
        found.append(
            "handler must not be a generator function (it uses yield): it would be called "
            "and never run; make it a plain async def (or def) that returns"
        )
    if not callable(backoff):
        found.append("backoff must be callable: backoff(attempt) -> seconds")
    elif isinstance(backoff, ExponentialBackoff):
        found.extend(_backoff_problems(backoff))
    for name in _HOOKS:
        hook: object = getattr(config, name)
        if hook is None:
            continue
        if _yields(hook):
            found.append(
                f"{name} must not be a generator function (it uses yield): make it a plain "
                "async def that returns"
            )
        elif not is_async_callable(hook):
            found.append(f"{name} must be an async function (async def) or None")
    return found


def _batch_mode(config: WorkerConfig) -> list[str]:
    """A batch handler, instead of the handler: async, and the only one; not transactional
    (a transaction is per attempt, a batch handler's call is per batch)."""
    batch_handler: object = config.batch_handler
    if batch_handler is None:
        return []
    found = []
    if config.handler is not None:
        found.append("handler and batch_handler are mutually exclusive: give one of them")
    if _yields(batch_handler):
        found.append(
            "batch_handler must not be a generator function (it uses yield): make it a "
            "plain async def that returns one outcome per job"
        )
    elif not is_async_callable(batch_handler):
        found.append("batch_handler must be an async function (async def batch_handler(jobs, ctx))")
    if config.transactional is True:
        found.append(
            "batch_handler does not run in transactional mode (a transaction is per job "
            "attempt): set transactional=False, or use a handler"
        )
    return found


def _backoff_problems(backoff: ExponentialBackoff) -> list[str]:
    found = backoff.problems()
    if not found and backoff.cap > MAX_SECONDS:
        # Retry delays are written to the row: a backend refuses longer ones.
        found.append(f"backoff.cap must be at most {MAX_SECONDS:.0f} seconds (about a century)")
    return found


def _queue(queue: object) -> list[str]:
    return _refusal(check_queue, queue)


def _refusal(check: Callable[..., object], *args: object, **kwargs: Any) -> list[str]:
    """The message of a shared check's refusal (``trioqueue._backends.validation``), as a list."""
    try:
        check(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        return [str(exc)]
    return []


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _counts(config: WorkerConfig) -> list[str]:
    found = []
    for name in ("concurrency", "batch_size", "max_attempts"):
        value = getattr(config, name)
        if not _is_int(value) or value < 1:
            found.append(f"{name} must be a whole number of at least 1 (got {value!r})")
    quarantine_after: object = config.quarantine_after
    if quarantine_after is not None and not (
        isinstance(quarantine_after, int)
        and not isinstance(quarantine_after, bool)
        and 1 <= quarantine_after <= INT32_MAX
    ):
        found.append(
            f"quarantine_after must be a whole number from 1 to {INT32_MAX}, or None "
            f"(got {quarantine_after!r})"
        )
    max_snoozes: object = config.max_snoozes
    if not (
        isinstance(max_snoozes, int)
        and not isinstance(max_snoozes, bool)
        and 0 <= max_snoozes <= INT32_MAX
    ):
        found.append(
            f"max_snoozes must be a whole number from 0 to {INT32_MAX} (got {max_snoozes!r})"
        )
    transactional: object = config.transactional
    if not isinstance(transactional, bool):
        found.append("transactional must be True or False")
    return found


def _seconds(name: str, value: object, *, minimum: float = 0.0, zero_ok: bool = False) -> list[str]:
    return _refusal(check_seconds, name, value, minimum=minimum, zero_ok=zero_ok)


def _timings(config: WorkerConfig) -> list[str]:
    lease = _seconds("visibility_timeout", config.visibility_timeout, minimum=MIN_INTERVAL)
    beat = []
    if config.heartbeat_interval != "auto":
        beat = _seconds("heartbeat_interval", config.heartbeat_interval, minimum=MIN_INTERVAL)
    found = lease + beat
    if not found:  # H < V can only be judged once both are numbers
        found += _heartbeat_below_lease(config)
    found += _seconds("poll_interval", config.poll_interval, minimum=MIN_INTERVAL)
    found += _seconds("shutdown_grace", config.shutdown_grace, zero_ok=True)
    found += _seconds("blocking_threshold", config.blocking_threshold, minimum=MIN_INTERVAL)
    if config.max_job_duration is not None:
        found += _seconds("max_job_duration", config.max_job_duration)
    if config.schedule_interval is not None:
        found += _seconds("schedule_interval", config.schedule_interval, minimum=MIN_INTERVAL)
    if config.maintenance_interval is not None:
        found += _seconds("maintenance_interval", config.maintenance_interval, minimum=MIN_INTERVAL)
    return found


def _heartbeat_below_lease(config: WorkerConfig) -> list[str]:
    v = float(config.visibility_timeout)
    if config.heartbeat_interval == "auto":
        h = auto_heartbeat(v)
        if h >= v:
            return [
                f'heartbeat_interval="auto" means max(10, V/3) = {h:g}s, which must be less '
                f"than visibility_timeout ({v:g}s): set visibility_timeout above 10s"
            ]
        return []
    h = float(config.heartbeat_interval)
    if h >= v:
        return [f"heartbeat_interval ({h:g}s) must be less than visibility_timeout ({v:g}s)"]
    return []
