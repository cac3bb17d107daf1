"""Run one user handler under a real worker pool on the memory backend, and record it.

Theory of operation: :func:`run_handler` opens a fresh memory backend, enqueues one job and
runs :func:`trioqueue.run_worker_pool` on it, with the caller's handler wrapped so that its
start, progress, return, raise and cancellation are timed on trio's clock. Everything else
it learns through the pool's public seams: the ``WorkerConfig`` hooks (claims and outcomes)
and a :class:`~trioqueue.PoolObserver` (renewals, lost leases, outcome labels). The faults
are scenarios on a schedule (:func:`lose_lease`, :func:`cancel_job`,
:func:`stuck_renewals`), carried out with the memory backend's own testing hooks when their
time comes, so the pool meets them exactly as it would meet a real outage. The run ends when
the job is finished (succeeded or failed) and its last attempt's hook has run, or when
``give_up_after`` passes; then every fault is cleared (releasing wedged calls) and the pool is
stopped. Times in the record are seconds since the run began.

Sync (``def``) handlers run in a worker thread, and an autojump ``MockClock`` leaps ahead
while a thread runs (docs/testing.rst, "The memory backend"): :func:`run_handler` refuses
that pairing, and :func:`run_handler_sync` runs sync handlers on the real clock.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, final

import trio
import trio.testing

import trioqueue
from trioqueue._backends.memory.faults import hang, omit
from trioqueue._backends.validation import check_seconds
from trioqueue._core.progress import valid_progress
from trioqueue._runtime.config import check, is_async_callable
from trioqueue._runtime.observer import JobOutcome, LeaseLoss

__all__ = [
    "Attempt",
    "CancelJob",
    "HandlerRun",
    "LoseLease",
    "RecordingContext",
    "RunEvent",
    "Scenario",
    "StuckRenewals",
    "cancel_job",
    "lose_lease",
    "run_handler",
    "run_handler_sync",
    "stuck_renewals",
]

#: The worker id of the "other worker" that takes a row in ``lose_lease(reclaimed=True)``.
OTHER_WORKER = "trioqueue.testing:other-worker"

#: How often the harness's pool looks for work without a notice (an expired row is claimed
#: again only by a poll: nothing announces a lease running out).
POLL_INTERVAL = 1.0


# -- scenarios ---------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class LoseLease:
    """At ``at``, the running attempt loses its lease (see :func:`lose_lease`)."""

    at: float
    reclaimed: bool


@final
@dataclass(frozen=True, slots=True)
class CancelJob:
    """At ``at``, ``backend.cancel(job_id)`` is called (see :func:`cancel_job`)."""

    at: float


@final
@dataclass(frozen=True, slots=True)
class StuckRenewals:
    """From ``at``, renewals hang (see :func:`stuck_renewals`)."""

    at: float
    interruptible: bool


Scenario: TypeAlias = LoseLease | CancelJob | StuckRenewals


def lose_lease(at: float, *, reclaimed: bool = False) -> LoseLease:
    """The attempt running at ``at`` loses its lease.

    Args:
        at: seconds since the run began.
        reclaimed: ``False``: from ``at`` on, every renewal leaves the job out (neither
            renewed nor answered), so the worker's fence stops the handler when the lease
            it last saw runs out, and the row's lease lapses with it. ``True``: the row's
            lease is expired at ``at`` and another worker claims it at once, so the next
            renewal hears that the row is not this attempt's any more (or, on its final
            attempt, that the claim failed it) and the handler stops then.

    Raises:
        TypeError, ValueError: ``at`` is not a finite number >= 0.
    """
    return LoseLease(_at(at), bool(reclaimed))


def cancel_job(at: float) -> CancelJob:
    """At ``at``, an operator cancels the job (``backend.cancel``): a running handler is
    stopped, and the job ends ``failed`` with a ``last_error`` starting ``"cancelled"``.

    Raises:
        TypeError, ValueError: ``at`` is not a finite number >= 0.
    """
    return CancelJob(_at(at))


def stuck_renewals(at: float, *, interruptible: bool = False) -> StuckRenewals:
    """From ``at`` until the running attempt ends, every renewal hangs.

    Args:
        at: seconds since the run began.
        interruptible: ``False``: the calls ignore cancellation, like a wedged driver
            call, and hold their connection until the fault is cleared; ``True``: the
            guard's own timeout ends each call. Either way no renewal gets through, and the
            fence stops the handler when the lease it last saw runs out.

    Raises:
        TypeError, ValueError: ``at`` is not a finite number >= 0.
    """
    return StuckRenewals(_at(at), bool(interruptible))


def _at(at: object) -> float:
    return check_seconds("at", at)  # the backends' own check of a number of seconds


# -- the record --------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class RunEvent:
    """One line of the run's timeline.

    ``kind`` is one of: ``claimed``, ``started``, ``progress`` (detail: the value),
    ``returned`` (detail: the value), ``raised`` (detail: the exception),
    ``handler_cancelled`` (``trio.Cancelled`` left an async handler), ``renewal`` (a
    renewal statement came back, or gave up), ``renewal_abandoned``, ``lease_lost``
    (detail: ``"lease_expired"``, ``"reclaimed"`` or ``"gone"``), an outcome (``succeeded``, ``failed``, ``retried``, ``cancelled``, ``unavailable``; detail: the
    hook's message or retry delay), or ``fault`` (detail: the scenario carried out).
    """

    at: float
    kind: str
    attempt: int | None = None
    detail: object = None


@final
@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of the job, as the harness saw it.

    Attributes:
        number: 1 for the first attempt: the job's attempt number, as ``ctx.attempt``
            says it. A snoozed attempt is not charged (docs/protocol.rst §17), so the run
            after it has the same number; each is an attempt of its own here.
        claimed_at: when the pool claimed it.
        started_at: when the handler was called (None: it never was, e.g. claim hooks
            ran past ``max_job_duration``).
        ended_at: when its outcome was settled (None: still running when the run ended).
        outcome: as the pool's observer labels it (``succeeded``, ``retried``, ``failed``,
            ``cancelled``, ``snoozed``, ``unavailable``), None while running.
        message: the failure or unavailability text the hooks got (None on success).
        error: the exception the handler raised, if any.
        result: what the handler returned.
        cancelled_at: when cancellation reached the handler: an async handler's
            ``trio.Cancelled`` leaving it; for a sync handler, when it returned after
            ``ctx.cancel_requested`` became true. None if it was never stopped.
        progress: ``(time, value)`` for every valid ``ctx.report_progress`` call.
    """

    number: int
    claimed_at: float
    started_at: float | None = None
    ended_at: float | None = None
    outcome: JobOutcome | None = None
    message: str | None = None
    error: BaseException | None = None
    result: object = None
    cancelled_at: float | None = None
    progress: tuple[tuple[float, float], ...] = ()


@final
@dataclass(frozen=True, slots=True)
class HandlerRun:
    """What :func:`run_handler` saw. The shortcuts read the last attempt.

    Attributes:
        job: the job's row at the end of the run (status, attempts, last_error, progress,
            result, ...).
        attempts: every attempt the pool ran, in order.
        events: the timeline, in order.
        renewals: renewal statements that came back or gave up (beats alone not counted).
        finished: the job ended (succeeded or failed) before ``give_up_after``.
    """

    job: trioqueue.JobInfo
    attempts: tuple[Attempt, ...]
    events: tuple[RunEvent, ...]
    renewals: int
    finished: bool

    @property
    def last(self) -> Attempt | None:
        """The last attempt (None if the job was never claimed)."""
        return self.attempts[-1] if self.attempts else None

    @property
    def outcome(self) -> JobOutcome | None:
        """The last attempt's outcome."""
        return None if self.last is None else self.last.outcome

    @property
    def error(self) -> BaseException | None:
        """What the last attempt's handler raised."""
        return None if self.last is None else self.last.error

    @property
    def cancelled_at(self) -> float | None:
        """When cancellation reached the last attempt's handler."""
        return None if self.last is None else self.last.cancelled_at

    @property
    def progress(self) -> tuple[tuple[float, float], ...]:
        """The last attempt's reported progress, ``(time, value)`` each."""
        return () if self.last is None else self.last.progress

    def of(self, kind: str) -> list[RunEvent]:
        """The timeline's events of one kind."""
        return [event for event in self.events if event.kind == kind]


# -- recording ---------------------------------------------------------------------------


@dataclass(eq=False)
class _Recorder(trioqueue.PoolObserver):
    """Collects the timeline from the wrapped handler, the hooks and the observer."""

    start: float
    events: list[RunEvent] = field(default_factory=list)
    # In claim order. Not keyed by attempt number: a snoozed attempt gives its number back,
    # and the run after it has it too (docs/protocol.rst §17).
    attempts: list[Attempt] = field(default_factory=list)
    renewals: int = 0
    changed: trio.Event = field(default_factory=trio.Event)
    running: int | None = None  # the attempt whose handler or hooks are under way
    pending_outcome: JobOutcome | None = None  # the observer's label, until its hook runs

    def now(self) -> float:
        return trio.current_time() - self.start

    def add(self, kind: str, attempt: int | None = None, detail: object = None) -> float:
        at = self.now()
        self.events.append(RunEvent(at, kind, attempt, detail))
        self.changed.set()
        self.changed = trio.Event()
        return at

    def update(self, index: int, **changes: Any) -> None:
        self.attempts[index] = dataclasses.replace(self.attempts[index], **changes)

    def latest(self, number: int) -> int:
        """The index of the newest record of attempt ``number`` (the one a handler that
        was just called runs), made now if the pool never said it claimed it."""
        for index in range(len(self.attempts) - 1, -1, -1):
            if self.attempts[index].number == number:
                return index
        self.attempts.append(Attempt(number, claimed_at=self.now()))
        return len(self.attempts) - 1

    def oldest_open(self, number: int) -> int | None:
        """The index of the oldest unended record of attempt ``number``: the one an
        outcome settles (a snoozed run's record ends before the next run's)."""
        for index, attempt in enumerate(self.attempts):
            if attempt.number == number and attempt.ended_at is None:
                return index
        return None

    def started(self, index: int) -> None:
        self.update(index, started_at=self.add("started", self.attempts[index].number))

    def progress(self, index: int, value: float) -> None:
        at = self.add("progress", self.attempts[index].number, value)
        self.update(index, progress=(*self.attempts[index].progress, (at, value)))

    def running_number(self) -> int | None:
        """The number of the attempt under way, if one is (for the timeline)."""
        return None if self.running is None else self.attempts[self.running].number

    def open_attempts(self) -> list[int]:
        return [a.number for a in self.attempts if a.ended_at is None]

    # the observer: what the pool tells its metrics
    def renewal_finished(self, seconds: float) -> None:
        self.renewals += 1
        self.add("renewal", self.running_number())

    def renewal_abandoned(self) -> None:
        self.add("renewal_abandoned", self.running_number())

    def lease_lost(self, reason: LeaseLoss) -> None:
        self.add("lease_lost", self.running_number(), reason)

    def job_finished(self, queue: str, outcome: JobOutcome) -> None:
        if outcome == "snoozed" and self.running is not None:
            # No hook follows a snooze (docs/protocol.rst §17): it ends the attempt now.
            number = self.attempts[self.running].number
            self._settle(number, "snoozed", None, None)
            return
        self.pending_outcome = outcome  # the hook that follows names the attempt

    # the hooks: claims and outcomes
    async def on_job_claimed(self, job: trioqueue.Job) -> None:
        at = self.add("claimed", job.attempt)
        self.attempts.append(Attempt(job.attempt, claimed_at=at))
        self.running = len(self.attempts) - 1

    async def on_job_succeeded(self, job: trioqueue.Job) -> None:
        self._ended(job, "succeeded", None)

    async def on_job_failed(self, job: trioqueue.Job, error: str) -> None:
        self._ended(job, "failed", error)

    async def on_job_retry(self, job: trioqueue.Job, delay: float) -> None:
        self._ended(job, "retried", None, delay)

    async def on_job_unavailable(self, job: trioqueue.Job, reason: str) -> None:
        self._ended(job, "unavailable", reason)

    def _ended(
        self, job: trioqueue.Job, fallback: JobOutcome, message: str | None, detail: object = None
    ) -> None:
        # The observer's label is finer (a cancelled failure says "cancelled").
        outcome = self.pending_outcome or fallback
        self.pending_outcome = None
        self._settle(job.attempt, outcome, message, detail)

    def _settle(
        self, number: int, outcome: JobOutcome, message: str | None, detail: object
    ) -> None:
        at = self.add(outcome, number, message if detail is None else detail)
        index = self.oldest_open(number)
        if index is None:  # claimed and lost before its hook ran
            self.attempts.append(Attempt(number, claimed_at=at))
            index = len(self.attempts) - 1
        self.update(index, ended_at=at, outcome=outcome, message=message)
        if self.running == index:
            self.running = None

    def hooks(self) -> dict[str, Any]:
        return {
            "on_job_claimed": self.on_job_claimed,
            "on_job_succeeded": self.on_job_succeeded,
            "on_job_failed": self.on_job_failed,
            "on_job_retry": self.on_job_retry,
            "on_job_unavailable": self.on_job_unavailable,
        }


class RecordingContext:
    """The :class:`~trioqueue.JobContext` a handler gets under the harness: the pool's own,
    passed through, except that valid ``report_progress`` calls are recorded with their
    time. (It is not a ``JobContext`` instance: that class is final.)"""

    __slots__ = ("_ctx", "_record")

    def __init__(self, ctx: trioqueue.JobContext, record: Callable[[float], None]) -> None:
        self._ctx = ctx
        self._record = record

    def report_progress(self, value: float) -> None:
        progress = valid_progress(value)
        self._ctx.report_progress(value)
        if progress is not None:
            self._record(progress)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _wrap(handler: Callable[..., Any], rec: _Recorder) -> Callable[..., Any]:
    """The handler the pool runs: the caller's, timed; async or sync as it is."""
    if is_async_callable(handler):
        return functools.partial(_run_async, handler, rec)
    return functools.partial(_run_in_thread, handler, rec)


async def _run_async(
    handler: Callable[..., Any], rec: _Recorder, payload: Any, ctx: trioqueue.JobContext
) -> Any:
    index = rec.latest(ctx.attempt)
    rec.started(index)
    view = RecordingContext(ctx, functools.partial(rec.progress, index))
    try:
        result = await handler(payload, view)
    except trio.Cancelled:
        rec.update(index, cancelled_at=rec.add("handler_cancelled", ctx.attempt))
        raise
    except Exception as exc:
        _raised(rec, index, exc)
        raise
    _returned(rec, index, result, stopped=ctx.cancel_requested)
    return result


def _raised(rec: _Recorder, index: int, exc: BaseException) -> None:
    rec.add("raised", rec.attempts[index].number, exc)
    rec.update(index, error=exc)


def _returned(rec: _Recorder, index: int, result: object, *, stopped: bool) -> None:
    at = rec.add("returned", rec.attempts[index].number, result)
    rec.update(index, result=result)
    if stopped:  # it returned after being asked to stop: that is how it saw the cancel
        rec.update(index, cancelled_at=at)


def _run_in_thread(
    handler: Callable[..., Any], rec: _Recorder, payload: Any, ctx: trioqueue.JobContext
) -> Any:
    """A sync handler, in its worker thread: recording happens back in trio's thread."""

    def in_trio(fn: Callable[..., object], *args: object) -> None:
        trio.from_thread.run_sync(fn, *args)

    index = trio.from_thread.run_sync(rec.latest, ctx.attempt)
    in_trio(rec.started, index)
    view = RecordingContext(ctx, lambda value: in_trio(rec.progress, index, value))
    try:
        result = handler(payload, view)
    except Exception as exc:
        in_trio(_raised, rec, index, exc)
        raise
    in_trio(lambda: _returned(rec, index, result, stopped=ctx.cancel_requested))
    return result


# -- running -----------------------------------------------------------------------------


async def run_handler(
    handler: Callable[..., Any],
    payload: Any = None,
    *,
    queue: str = "test",
    visibility_timeout: float = 30,
    heartbeat_interval: float = 10,
    max_job_duration: float | None = None,
    max_attempts: int = 1,
    backoff: Callable[[int], float] | None = None,
    faults: Iterable[Scenario] | Scenario = (),
    resources: object = None,
    give_up_after: float = 3600,
) -> HandlerRun:
    """Run ``handler`` on one job under a worker pool on a fresh memory backend.

    Call it inside trio, under ``trio.testing.MockClock(autojump_threshold=0)`` (pytest-trio's
    ``autojump_clock`` fixture) so that minutes of leases take no time; or use
    :func:`run_handler_sync` from a test that is not async.

    Args:
        handler: your ``async def handler(payload, ctx)`` (or a plain ``def``; see
            :func:`run_handler_sync`). ``ctx`` is the pool's context, with
            ``report_progress`` recorded.
        payload: the job's payload (JSON-serialisable).
        queue: the job's queue (the pool's too).
        visibility_timeout: V, the lease length, as in :class:`~trioqueue.WorkerConfig`.
        heartbeat_interval: H, the renewal cadence.
        max_job_duration: D, the longest claim hooks plus handler may run, or None.
        backoff: ``backoff(attempt) -> seconds`` before a retry; None: the default policy.
        max_attempts: the job's attempts, as in ``enqueue``.
        faults: scenarios from :func:`lose_lease`, :func:`cancel_job` and
            :func:`stuck_renewals` (or one alone), each carried out at its time. Faults on renewals
            replace one another, as ``backend.inject`` does.
        resources: the handler's ``ctx.resources``.
        give_up_after: seconds after which the run stops even if the job is not finished
            (``HandlerRun.finished`` is then false). Stopping cancels the handler; one
            that shields itself from cancellation for good keeps the run from ending.

    Returns:
        The :class:`HandlerRun` record.

    Raises:
        ConfigError: the settings are refused, as a worker pool refuses them.
        TypeError, ValueError: a fault that is not a scenario, a bad ``max_attempts``,
            a bad ``give_up_after``.
        RuntimeError: a sync handler under an autojump clock.
    """
    scenarios = _scenarios(faults)
    give_up_after = _give_up_after(give_up_after)
    config = trioqueue.WorkerConfig(
        handler=handler,
        queue=queue,
        visibility_timeout=visibility_timeout,
        heartbeat_interval=heartbeat_interval,
        max_job_duration=max_job_duration,
        poll_interval=POLL_INTERVAL,
        shutdown_grace=0,
        schedule_interval=None,
    )
    if backoff is not None:
        config = dataclasses.replace(config, backoff=backoff)
    check(config)  # the pool's own check, before anything runs
    _refuse_thread_under_autojump(handler)
    rec = _Recorder(start=trio.current_time())
    config = dataclasses.replace(config, handler=_wrap(handler, rec), **rec.hooks())
    async with trioqueue.open_memory() as backend:
        job_id = await backend.enqueue(queue, payload, max_attempts=max_attempts)
        finished = await _run_pool(
            backend, config, rec, job_id, scenarios, resources, give_up_after
        )
        job = await backend.get_job(job_id)
    return HandlerRun(
        job=job,
        attempts=tuple(rec.attempts),
        events=tuple(rec.events),
        renewals=rec.renewals,
        finished=finished,
    )


def run_handler_sync(
    handler: Callable[..., Any], payload: Any = None, **options: Any
) -> HandlerRun:
    """:func:`run_handler` from plain (non-async) code, in a ``trio.run`` of its own.

    An async handler runs under ``MockClock(autojump_threshold=0)``: no real time passes. A
    sync handler runs on the real clock, since an autojump clock would leap ahead while its
    thread runs; its leases and faults then take real seconds, so keep them short.
    """
    clock = trio.testing.MockClock(autojump_threshold=0) if is_async_callable(handler) else None
    run = functools.partial(run_handler, handler, payload, **options)
    return trio.run(run, clock=clock)


async def _run_pool(
    backend: trioqueue.MemoryBackend,
    config: trioqueue.WorkerConfig,
    rec: _Recorder,
    job_id: int,
    scenarios: list[Scenario],
    resources: object,
    give_up_after: float,
) -> bool:
    """Run the pool and the scenarios until the job is finished and its last attempt's
    hook ran, or ``give_up_after``; then clear the faults and stop the pool. True if finished."""
    async with trio.open_nursery() as nursery:
        pool = functools.partial(
            trioqueue.run_worker_pool, backend, config, observer=rec, resources=resources
        )
        await nursery.start(pool)
        for scenario in scenarios:
            nursery.start_soon(_carry_out, scenario, backend, rec, job_id, config)
        with trio.move_on_after(give_up_after):
            await backend.wait_for(job_id)
            while rec.open_attempts():
                await rec.changed.wait()
        finished = (await backend.get_job(job_id)).status in ("succeeded", "failed")
        backend.inject("renew", None)  # release wedged calls, or the pool cannot stop
        nursery.cancel_scope.cancel()
    return finished


async def _carry_out(
    scenario: Scenario,
    backend: trioqueue.MemoryBackend,
    rec: _Recorder,
    job_id: int,
    config: trioqueue.WorkerConfig,
) -> None:
    await trio.sleep_until(rec.start + scenario.at)
    if isinstance(scenario, CancelJob):
        rec.add("fault", rec.running_number(), scenario)
        await backend.cancel(job_id)
        return
    while rec.running is None:  # a lease fault needs a running attempt: wait for the next
        await rec.changed.wait()
    index = rec.running
    rec.add("fault", rec.attempts[index].number, scenario)
    if isinstance(scenario, StuckRenewals):
        backend.inject("renew", hang(interruptible=scenario.interruptible))
    elif scenario.reclaimed:
        try:
            backend.expire(job_id)
        except ValueError:  # the attempt finished meanwhile (its hook is still to run)
            return
        await backend.claim(
            config.queue,
            limit=1,
            worker_id=OTHER_WORKER,
            visibility_timeout=float(config.visibility_timeout),
        )
    else:
        backend.inject("renew", omit([job_id]))
    while rec.attempts[index].ended_at is None:  # the fault lasts as long as the attempt
        await rec.changed.wait()
    backend.inject("renew", None)


def _scenarios(faults: object) -> list[Scenario]:
    if isinstance(faults, LoseLease | CancelJob | StuckRenewals):
        return [faults]  # one scenario alone is as good as a list of one
    if not isinstance(faults, Iterable):
        raise TypeError(f"faults must be a list of scenarios, not {faults!r}")
    found: list[Scenario] = []
    for fault in faults:
        if not isinstance(fault, LoseLease | CancelJob | StuckRenewals):
            raise TypeError(
                "faults must come from lose_lease(), cancel_job() or stuck_renewals(), "
                f"not {fault!r} (backend faults such as hang() go to backend.inject)"
            )
        found.append(fault)
    return found


def _give_up_after(seconds: object) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"give_up_after must be a number of seconds, not {seconds!r}")
    if math.isnan(seconds) or seconds <= 0:
        raise ValueError(f"give_up_after must be a number of seconds > 0, not {seconds!r}")
    return float(seconds)


def _refuse_thread_under_autojump(handler: Callable[..., Any]) -> None:
    clock = trio.lowlevel.current_clock()
    autojumps = isinstance(clock, trio.testing.MockClock) and clock.autojump_threshold < math.inf
    if autojumps and not is_async_callable(handler):
        raise RuntimeError(
            "a sync (def) handler runs in a worker thread, and an autojump MockClock leaps "
            "ahead while the thread runs, so its lease would expire at once: use "
            "run_handler_sync(), which runs sync handlers on the real clock, or call "
            "run_handler() under trio's own clock"
        )
