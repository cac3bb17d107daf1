"""Plain data shared by the runtime, the backends and the public API."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, final

from trioqueue._core.wire import Verdict

__all__ = [
    "Ack",
    "AttemptTiming",
    "BackendStatistics",
    "Claimed",
    "Claims",
    "DependencyInfo",
    "EnqueueOutcome",
    "Enqueued",
    "Failure",
    "FinishedBucket",
    "Job",
    "JobCount",
    "JobDependencies",
    "JobInfo",
    "JobSort",
    "JobStatus",
    "Notice",
    "NoticeKind",
    "OnDependencyFailure",
    "OnDuplicate",
    "PoolBeat",
    "PoolRegistration",
    "QueueStats",
    "Release",
    "ScheduleInfo",
    "TruncatedText",
    "UndecodablePayload",
    "Verdict",
    "WorkerInfo",
]

#: The states :class:`JobInfo` reports. A cancelled job is ``"failed"``.
JobStatus = Literal["scheduled", "ready", "running", "succeeded", "failed"]
JOB_STATUSES: tuple[JobStatus, ...] = ("scheduled", "ready", "running", "succeeded", "failed")

#: Orders ``list_jobs`` can return: a column, ascending, or descending with a leading ``-``.
#: Ties are broken by id in the same direction; unfinished jobs (no ``finished_at``) come
#: last in both ``finished_at`` orders.
JobSort = Literal[
    "id", "-id", "priority", "-priority", "created_at", "-created_at", "finished_at", "-finished_at"
]
JOB_SORTS: tuple[JobSort, ...] = (
    "id", "-id", "priority", "-priority", "created_at", "-created_at", "finished_at", "-finished_at"
)  # fmt: skip

#: What ``enqueue(..., dedup_key=k, on_duplicate=...)`` does when an unfinished job of the
#: queue holds ``k`` (docs/protocol.rst §18): ``keep`` it as it is (the default),
#: ``replace`` its payload, priority and run time, or ``debounce`` it (push its run time
#: back to now + delay). Only a waiting duplicate is ever changed, never a running one.
OnDuplicate = Literal["keep", "replace", "debounce"]
ON_DUPLICATE: tuple[OnDuplicate, ...] = ("keep", "replace", "debounce")

#: What befalls a job enqueued with ``depends_on`` when one of its dependencies fails for
#: good (docs/protocol.rst §21): it ``fail``\ s, or is cancelled (``cancel``: failed, with
#: ``JobInfo.cancelled``). Either way it never runs.
OnDependencyFailure = Literal["fail", "cancel"]
ON_DEPENDENCY_FAILURE: tuple[OnDependencyFailure, ...] = ("fail", "cancel")

#: What an enqueue with a dedup key did: ``added`` a new job; ``kept`` the duplicate
#: unchanged (``on_duplicate="keep"``); ``replaced`` or ``debounced`` the waiting
#: duplicate; or changed nothing because the duplicate is ``running``.
EnqueueOutcome = Literal["added", "kept", "replaced", "debounced", "running"]


@final
class Enqueued(tuple[int, bool]):
    """What ``enqueue_deduplicated`` did: unpacks as ``(id, added)``, as it always has.

    ``id`` is the new job's, or the duplicate's when nothing was added; ``added`` is True
    for a new job only; ``outcome`` says what happened (:data:`EnqueueOutcome`). It
    compares (and hashes) as its ``(id, added)`` pair.
    """

    outcome: EnqueueOutcome

    def __new__(cls, job_id: int, outcome: EnqueueOutcome) -> Enqueued:
        self = super().__new__(cls, (job_id, outcome == "added"))
        object.__setattr__(self, "outcome", outcome)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Enqueued is read-only ({name})")

    def __getnewargs__(self) -> tuple[int, EnqueueOutcome]:
        return self[0], self.outcome  # (pickling and copying keep the outcome)

    def __repr__(self) -> str:
        return f"Enqueued(id={self[0]}, outcome={self.outcome!r})"

    @property
    def id(self) -> int:
        """The new job's id, or the duplicate's."""
        return self[0]

    @property
    def added(self) -> bool:
        """Whether a new job was added."""
        return self[1]


@final
@dataclass(frozen=True, slots=True)
class Job:
    """One claimed job, as handlers and hooks see it."""

    id: int
    queue: str
    payload: Any
    attempt: int  # 1 for the first attempt
    max_attempts: int
    claim_seq: int  # the fencing counter of this attempt
    #: Seconds from the job becoming visible (enqueued, its delay over, put back) to this
    #: claim, by the database clock; None where the backend does not know.
    waited: float | None = None
    #: The trace context active when the job was enqueued (W3C ``traceparent`` and
    #: ``tracestate`` keys), stored with the row; None without OpenTelemetry
    #: (docs/telemetry.rst).
    trace_context: Mapping[str, str] | None = None
    #: The checkpoint an earlier attempt stored (``ctx.checkpoint``, decoded JSON), which
    #: the claim delivers; None when none did (docs/protocol.rst §16).
    checkpoint: Any = None


@final
@dataclass(frozen=True, slots=True)
class JobInfo:
    """A snapshot of a job's row, for producers and operators."""

    id: int
    queue: str
    payload: Any
    status: JobStatus
    attempts: int
    max_attempts: int
    priority: int
    progress: float | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None
    #: For a running job: when its row's lease runs out (else None).
    lease_expires_at: datetime | None = None
    #: When the lease was last taken (claim) or renewed; kept after the attempt ends.
    last_renewed_at: datetime | None = None
    #: When a cancel was requested (``cancel``), until a ``retry`` clears it.
    cancel_requested_at: datetime | None = None
    #: When a renewal first delivered the cancel directive to the pool holding the job.
    cancel_acknowledged_at: datetime | None = None
    #: For a running job: the worker pool holding its lease (``WorkerInfo.worker_id``).
    worker_id: str | None = None
    #: What the handler of its last successful attempt returned (decoded JSON); None when
    #: it returned nothing, or no attempt has succeeded yet.
    result: Any = None
    #: The job's group (``enqueue(..., group=)``): jobs of one group run one at a time.
    group: str | None = None
    #: True for a ``failed`` job whose last attempt ended because a cancel was asked: a
    #: cancelled job's status stays ``failed`` (docs/guarantees.rst), this tells them apart.
    cancelled: bool = False
    #: For a ``scheduled`` job (a delay, or a retry waiting out its backoff): when it
    #: becomes ready to run. None otherwise.
    next_attempt_at: datetime | None = None
    #: For a finished job: the worker pool that ran its last attempt
    #: (``WorkerInfo.worker_id``); None when no pool did (cancelled before it ran).
    finished_by: str | None = None
    #: The latest checkpoint an attempt stored (``ctx.checkpoint``, decoded JSON), and when
    #: it was stored; None when none was. Read by ``get_job`` and ``wait_for`` (a list of
    #: jobs carries none: docs/protocol.rst §16).
    checkpoint: Any = None
    checkpointed_at: datetime | None = None
    #: How many times the job snoozed (``Snooze``), across its attempts; never reset by a
    #: ``retry`` (docs/protocol.rst §17).
    snoozes: int = 0
    #: For a job enqueued with ``depends_on`` that still waits: the ids of its dependencies
    #: that have not succeeded yet, ascending (docs/protocol.rst §21); empty otherwise. A
    #: waiting job is ``scheduled`` with no ``next_attempt_at``. Read by ``get_job`` only.
    waiting_on: tuple[int, ...] = ()
    #: The job it was enqueued under (``enqueue(..., parent_id=)``, docs/protocol.rst §22);
    #: None for a job without a parent. Read by ``get_job`` only.
    parent_id: int | None = None


@final
@dataclass(frozen=True, slots=True)
class DependencyInfo:
    """One end of a dependency edge: a job's id, queue and current state (§21)."""

    id: int
    queue: str
    status: JobStatus


@final
@dataclass(frozen=True, slots=True)
class JobDependencies:
    """A job's dependencies (the jobs it runs after) and dependents (the jobs that run
    after it), each by ascending id (``backend.dependencies``, docs/protocol.rst §21); and
    its parent (None for none) and children in enqueue order (§22)."""

    job_id: int
    dependencies: tuple[DependencyInfo, ...] = ()
    dependents: tuple[DependencyInfo, ...] = ()
    parent: DependencyInfo | None = None
    children: tuple[DependencyInfo, ...] = ()


@final
class UndecodablePayload(str):
    """A stored payload this process cannot decode: its JSON text, as the database prints it.

    ``JobInfo.payload`` is one of these (a ``str``, so it prints and serialises as text) when
    a row holds JSON that Python's ``json`` module refuses, such as a number with more digits
    than ``sys.get_int_max_str_digits()`` allows or nesting deeper than the recursion limit
    (another tool wrote the row). ``error`` says why. A worker never runs such a job: its
    claim fails it on its own (docs/postgres.rst, "Payloads").
    """

    error: str

    def __new__(cls, text: str, error: str) -> UndecodablePayload:
        payload = super().__new__(cls, text)
        payload.error = error
        return payload

    def __repr__(self) -> str:
        return f"UndecodablePayload({str(self)[:40]!r}..., error={self.error!r})"


@final
class TruncatedText(str):
    """The first characters of a long stored text, from a list read with ``preview=``.

    ``list_jobs(..., preview=n)`` (and ``get_jobs``) carry at most ``n`` characters of
    each job's payload, result and ``last_error``, cut by the database: a value longer
    than that comes back as one of these (a ``str``, so it prints as the prefix), with
    ``length``, the whole text's length in characters. For a payload or a result the
    text is its stored JSON text, cut anywhere (so not JSON itself). ``get_job`` always
    carries the whole value.
    """

    length: int

    def __new__(cls, prefix: str, length: int) -> TruncatedText:
        text = super().__new__(cls, prefix)
        text.length = length
        return text

    def __repr__(self) -> str:
        return f"TruncatedText({str(self)[:40]!r}..., length={self.length})"


@final
@dataclass(frozen=True, slots=True)
class Claimed:
    """A claimed job and its row lease, in the backend's wall-clock seconds.

    ``locked_after`` is how long after the claim statement began the row was locked and
    its lease started, measured on the backend's own clock (so no clock agreement is
    needed): a claim that waited on a lock leases its rows from then, not from its start
    (docs/protocol.rst, "Rows, attempts and fencing").

    ``alone`` is True for a quarantined job, one whose last attempts all ended without an
    outcome: it came as the only job of its claim, and the pool must run nothing beside it
    until it ends (docs/protocol.rst §13).
    """

    job: Job
    lease_until: float
    locked_after: float = 0.0
    alone: bool = False


class Claims(list[Claimed]):
    """What one claim took, in claim order: a list of :class:`Claimed`.

    ``retry_after`` is set when the queue's limits (``max_running``, ``max_per_second``)
    held back claimable jobs: claiming again sooner than that many seconds is likely to
    find the limit still reached (docs/flow.rst). None when no limit held anything back.

    ``database_clock`` is the backend's clock (epoch seconds, the clock of row times) as
    read while the claim ran, whether or not it took a row: the worker bounds its clock's
    offset by it (docs/protocol.rst §8). None when the backend gave no reading.

    ``alone_waiting`` is True when a quarantined job is claimable but this claim did not
    take it (it was not made alone, or the job's row was locked): the pool should claim
    again alone once nothing runs (docs/protocol.rst §13).
    """

    retry_after: float | None
    database_clock: float | None
    alone_waiting: bool

    def __init__(
        self,
        claimed: Iterable[Claimed] = (),
        retry_after: float | None = None,
        database_clock: float | None = None,
        alone_waiting: bool = False,
    ) -> None:
        super().__init__(claimed)
        self.retry_after = retry_after
        self.database_clock = database_clock
        self.alone_waiting = alone_waiting


@final
@dataclass(frozen=True, slots=True)
class AttemptTiming:
    """When an attempt's handler ran, by the worker's monotonic clock, measured from the
    claim's answer: the attempts table's ``started_at`` is ``claimed_at + started_after``."""

    started_after: float  # seconds from the claim's answer to the handler's start
    run_seconds: float  # the handler's run time


@final
@dataclass(frozen=True, slots=True)
class Ack:
    """Mark an attempt succeeded; a no-op unless ``claim_seq`` is still the row's.

    ``result`` is the handler's return value as JSON text (``encode_result``), None for
    nothing: the runtime encodes it, so a value with no JSON form fails the attempt
    rather than the write.
    """

    job_id: int
    claim_seq: int
    progress: float | None = None
    result: str | None = None
    timing: AttemptTiming | None = None
    #: The attempt's latest checkpoint as JSON text (docs/protocol.rst §16); None: none.
    checkpoint: str | None = None


@final
@dataclass(frozen=True, slots=True)
class Failure:
    """Record a failed attempt: back to the queue after ``retry_delay`` s, or final if None."""

    job_id: int
    claim_seq: int
    error: str  # "Type: message", stored as last_error
    retry_delay: float | None
    progress: float | None = None
    timing: AttemptTiming | None = None
    #: The exception's qualified class name (None for a failure no exception raised,
    #: such as a timeout or an undecodable payload).
    error_type: str | None = None
    #: The formatted traceback, bounded by ``bound_traceback`` (MAX_TRACEBACK_CHARS).
    #: Whether the failure is a cancellation is the backend's to say (a cancel asked
    #: before the write: docs/protocol.rst §14), not the worker's.
    traceback: str | None = None
    #: The attempt's latest checkpoint as JSON text, kept for the retry (§16).
    checkpoint: str | None = None


class Recorded(enum.Enum):
    """What a fenced :class:`Failure` became (``None`` instead when its fence did not match).

    The backend may record as final a failure the worker asked to retry: the job was asked to
    cancel meanwhile (a cancelled job is never retried), or its last attempt was used up.
    """

    RETRY = "retry"  # back in the queue, to run again after the delay
    FINAL = "final"  # failed for good


@final
@dataclass(frozen=True, slots=True)
class Release:
    """Give an attempt back without charging it (graceful shutdown, or no database
    connection for the handler: docs/protocol.rst §4)."""

    job_id: int
    claim_seq: int
    progress: float | None = None
    timing: AttemptTiming | None = None
    #: The attempt's latest checkpoint as JSON text, kept for the next attempt (§16).
    checkpoint: str | None = None


@final
@dataclass(frozen=True, slots=True)
class SnoozeWrite:
    """Put an attempt's job back for ``seconds`` without charging the attempt (the handler
    answered ``Snooze``, docs/protocol.rst §17); a no-op unless ``claim_seq`` is still the
    row's."""

    job_id: int
    claim_seq: int
    seconds: float
    progress: float | None = None
    timing: AttemptTiming | None = None
    #: The attempt's latest checkpoint as JSON text, kept for the next attempt (§16).
    checkpoint: str | None = None


class Snoozed(enum.Enum):
    """What a fenced :class:`SnoozeWrite` became (``None`` instead when its fence did not
    match): snoozed, or failed for good because the job had snoozed ``max_snoozes`` times
    already, or because a cancel was asked (a cancellation)."""

    SNOOZED = "snoozed"  # back in the queue after the delay, the attempt given back
    LIMIT = "failed"  # failed for good, charged: the bound (§17)
    CANCELLED = "cancelled"  # failed for good: a cancel was asked


@final
@dataclass(frozen=True, slots=True)
class ChildWaitWrite:
    """Put an attempt's job back to wait for its unfinished children, the attempt not
    charged (the handler answered ``AwaitChildren``, docs/protocol.rst §22); a no-op unless
    ``claim_seq`` is still the row's. ``on_child_failure`` is ``"fail"`` or ``"continue"``."""

    job_id: int
    claim_seq: int
    on_child_failure: str = "fail"
    progress: float | None = None
    timing: AttemptTiming | None = None
    #: The attempt's latest checkpoint as JSON text, kept for the next attempt (§16).
    checkpoint: str | None = None


class ChildWait(enum.Enum):
    """What a fenced :class:`ChildWaitWrite` became (``None`` instead when its fence did
    not match): waiting for its children (claimable at once with none unfinished), failed
    for good (``"fail"`` and a child had already failed), or cancelled (a cancel asked)."""

    WAITING = "waiting"
    FAILED = "failed"
    CANCELLED = "cancelled"


class NoticeKind(enum.Enum):
    AVAILABLE = "available"  # new work on a queue
    CANCEL = "cancel"  # a running job was asked to cancel
    FINISHED = "finished"  # a job someone waits for (wait_for) finished or was deleted


@final
@dataclass(frozen=True, slots=True)
class Notice:
    """A push from the backend to a listening pool (PostgreSQL: LISTEN/NOTIFY)."""

    kind: NoticeKind
    queue: str
    job_id: int | None = None


@final
@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's jobs at one moment (``Backend.queue_stats``).

    ``oldest_ready_age`` is how long the queue's oldest *ready* job has been claimable, in
    seconds: now minus its ``not_visible_until`` (when it was enqueued, put back or its delay
    or lease ran out), None when no job is ready (docs/metrics.rst).
    """

    counts: Mapping[JobStatus, int]
    oldest_ready_age: float | None
    #: The queue's flow control (docs/flow.rst): paused, and its limits (None: no limit).
    paused: bool = False
    max_running: int | None = None
    max_per_second: float | None = None
    #: True when the finished counts (succeeded, failed) are estimates: past
    #: ``exact_finished_up_to`` finished jobs in the table, PostgreSQL's ``queue_stats``
    #: takes them from the planner's statistics instead of counting millions of rows
    #: (docs/dashboard.rst, "Big tables"). Live counts are always exact.
    estimated: bool = False


@final
@dataclass(frozen=True)
class JobCount:
    """How many jobs match a filter (``Backend.estimate_jobs``): ``n`` exactly, or, when
    ``estimated``, the planner's estimate (counting them would read too many rows)."""

    n: int
    estimated: bool = False


@final
@dataclass(frozen=True)
class BackendStatistics(Mapping[str, Any]):
    """Counters of a backend. Readable as attributes or as a mapping."""

    connections_in_use: int
    peak_connections_in_use: int
    calls: Mapping[str, int]
    extra: Mapping[str, Any] = field(default_factory=dict)

    def _as_dict(self) -> dict[str, Any]:
        return {
            "connections_in_use": self.connections_in_use,
            "peak_connections_in_use": self.peak_connections_in_use,
            "calls": dict(self.calls),
            **self.extra,
        }

    def __getitem__(self, key: str) -> Any:
        return self._as_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._as_dict())

    def __len__(self) -> int:
        return len(self._as_dict())


@final
@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One registered worker pool, as ``Backend.list_workers`` reports it.

    A pool registers itself when it starts, beats with its guard's renewals (every
    heartbeat interval, even when it holds no job), and unregisters on graceful shutdown.
    ``stale`` is True when it has not beaten for more than three of its heartbeat intervals:
    its process died, froze or lost the database (docs/api.rst, "Worker pools").
    """

    worker_id: str
    host: str
    pid: int
    queue: str
    concurrency: int
    in_flight: int  # jobs the pool held at its last beat
    abandoned_renewals: int  # renewals it abandoned so far, at its last beat
    last_beat_at: datetime
    started_at: datetime
    stale: bool
    #: Seconds its clock is ahead of the database's (negative: behind) and its verdict
    #: ("in_sync", "ahead": warned, "stopped": not claiming), at its last beat; None
    #: until measured (docs/protocol.rst §8).
    clock_skew: float | None = None
    clock_verdict: str | None = None


@final
@dataclass(frozen=True, slots=True)
class FinishedBucket:
    """Jobs that finished (for good) in one time bucket of ``Backend.finished_history``.

    The bucket covers ``start`` up to the next bucket's start; counts come from the rows'
    ``finished_at``, so a job retried and finished again counts at its last finish only.
    """

    start: datetime
    succeeded: int
    failed: int


@final
@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """One schedule (periodic job), as ``Backend.list_schedules`` reports it.

    At each tick of ``cron`` (five fields, read in ``timezone``) one job is enqueued on
    ``queue`` with ``payload``, ``priority`` and ``max_attempts``, by whichever worker pool
    gets there first (docs/scheduling.rst).
    """

    name: str
    queue: str
    cron: str
    timezone: str
    payload: Any
    priority: int
    max_attempts: int
    next_run_at: datetime  # the next tick (aware, UTC)
    last_run_at: datetime | None  # when a job was last enqueued for it; None: never
    enabled: bool = True  # a disabled schedule enqueues nothing (set_schedule_enabled)


@final
@dataclass(frozen=True, slots=True)
class PoolRegistration:
    """What a worker pool tells the backend about itself (``Backend.register_pool``)."""

    worker_id: str
    host: str
    pid: int
    queue: str
    concurrency: int
    heartbeat_interval: float  # seconds; three of them without a beat make the pool stale


@final
@dataclass(frozen=True, slots=True)
class PoolBeat:
    """A worker pool's heartbeat, carried by the guard's renewal statement (``renew``).

    It upserts the pool's row from ``pool``, so a pool whose registration failed, or whose
    row was pruned, reappears; and it records what the pool held at the beat.
    """

    pool: PoolRegistration
    in_flight: int  # jobs the pool holds
    abandoned_renewals: int  # renewals the pool has abandoned since it started
    #: Seconds the pool's clock is ahead of the database's (negative: behind), as last
    #: measured, and its verdict (docs/protocol.rst §8); None until measured.
    clock_skew: float | None = None
    clock_verdict: str | None = None  # "in_sync", "ahead" or "stopped"

    @property
    def worker_id(self) -> str:
        return self.pool.worker_id
