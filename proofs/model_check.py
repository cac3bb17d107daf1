"""The guard's sans-IO core, model-checked exhaustively in small scopes.

Theory of operation
-------------------
A *world* is one real :class:`~trioqueue._core.guard_rules.GuardCore` (imported, never
copied) plus what surrounds it: the clock, the driver calls still running, a lone beat, what
the database granted, and how much of the scope's budget is spent. From each world every
event the runtime (``trioqueue/_runtime/guard.py`` and ``batch.py``) or the database could
produce next is tried on a clone, in the order the runtime makes its calls:

- the guard task runs (``poll``, then ``next_renewal``; the statement is sent either on an
  interruptible call, which comes back by its give-up time, or a *wedged* one, which ignores
  its timeout: it comes back late, after being abandoned or superseded, or never);
- a driver call comes back: an answer (every job renewed, as an honest database says it,
  or one job ``cancel_requested``, ``reclaimed``, ``gone`` or left out, or nothing at all),
  an error, or its timeout at give-up; then the guard is poked;
- a batch registers (its first renewal is due at once), its claim's rows leased for V or, in
  some scopes, for less (a claim that waited); its claim hooks run in its scope for a while
  the scope chooses (none, or some grid steps), then its handlers start, unless the scope
  fired first; a handler exits (``job_done``, after ``batch_stop`` when its scope had fired,
  as ``batch.py`` decides the outcome): at any time, so a stopped handler may unwind for
  long; its batch leaves the guard with its last job. In a scope with ``writes``, the exit
  (``work_ended``, the outcome decided) and the outcome's write landing (``job_done``) are
  two events, so a batch whose jobs have all ended may have its first beat waived while
  their writes are out (docs/protocol.rst §10);
- a cancel notice (``request_renewal``), the pool's shutdown (``begin_shutdown``), a lone
  beat going (``begin_beat``) and coming back (``end_beat``);
- time passes.

Time is discrete, and honestly so. The core never reads a clock: every decision it makes is
a comparison of the ``now`` it is given against instants it holds (a batch's fence, lease,
duration deadline, next due time, scope deadline; a renewal's give-up and abandon times; the
shutdown deadline; ``next_wake``; when claim hooks return). Between two consecutive such
instants every one of those comparisons comes out the same. So time advances only to the
next instant, or, while a driver call is out, to one point strictly between now and it (the
midpoint, rounded down to a 1/16 s grid), once per interval: an answer can then come back
*at* each deadline and strictly *between* any two, that is early or late relative to each
one. New instants appear only with events (a renewal sent, an answer, a registration), and
the in-between points lie on the grid, so time does not fragment without end. Values the
core derives from ``now`` (a retry pause, the next beat) are taken at these representative
points only: the arithmetic over all real values is the z3 proofs' part (``timing.py``).
Every time is a dyadic fraction, so float arithmetic is exact and the key below needs no
rounding.

Bounds of the scope beyond its budgets (each keeps the search to seconds): a handler exits
and a batch registers at the instants only (a handler's exit derives no time from ``now``,
so half-way it would see what it sees at the instant before); cancel notices and the
shutdown also come in between while a renewal is out; a run ends once its last renewal
statement has settled or been abandoned.

The runtime's own pacing is modelled as it is: the guard runs after every poke (a
registration, an answer, a cancel notice, a beat's exit) and when its wake time comes, and
time does not pass while it is due to run, nor past an interruptible call's give-up time.

States are deduplicated by a canonical key: every time relative to ``now``, tokens by role
(current, abandoned), the due heap's live entries only, the beat anchor modulo ``H``, and
what can no longer matter left out (the times of a lost batch, the duration deadline of a
batch whose stop is frozen, how long ago a call's give-up time passed). The search is
breadth first, so the first violation found has a shortest trace.

What is checked (docs/protocol.rst §2 to §4, §6, §9):

- **I5** in every state: ``connections_held() <= 2``, and the driver calls really still
  running (renewals not yet returned, plus a lone beat) are at most two and are the ones the
  core counts.
- **I6** in every state: an answer or failure for any token that is neither current nor
  abandoned (settled, or never issued) changes nothing at all; and when the abandoned call
  exits, whatever it says, the core only frees its slot (then polls, as documented).
- **I8** on every transition: a batch's stop never changes once set, a lost lease stays
  lost, a job lost to ``reclaimed``/``gone`` keeps that stop; over a whole run each job is
  stopped at most once and cancelled at most once, and never stopped on a stopped batch.
- **§4** in every state: a batch whose fence has not passed and which has a handler still
  running on its row is carried by the current renewal or stays scheduled (a live heap
  entry, due within ``H``, no later than the guard's wake); when the guard sends, every due
  batch rides along; and an answer's verdicts count for a stopped batch too.
- **I2** in every state, claim hooks running or handlers: the fence is no later than what
  the modelled database granted (from the claim, or ``sent_at + V`` of an answer the core
  accepted), plus ``GRACE`` while a renewal carrying the batch is in flight.
- **I4** in every state: while a batch's claim hooks or handlers may run and its scope has
  not fired, its scope deadline is no later than its registration + D, so no hook or
  handler runs past it (time never steps past a scope deadline).
- **§3, a renewal in flight**, on every answer the core accepts: sent before the fence, the
  renewal holds the fence until its give-up time; an answer in [lease deadline, give-up
  time) that renews every job extends the fence, one at or after it finds the batch lost.
- **§2, the retry pace**, whenever a renewal fails, is abandoned or leaves a job unrenewed
  (left out, ``unchanged``, a first ``gone``): the batch is next due exactly
  ``min(H, max(0.25 s, remaining / 2))`` later, so no earlier than ``now + 0.25 s`` and no
  later than ``now + H``; after a first ``gone``, 0.25 s later; at once when a cancel
  notice waits (§10, refinement 6).
- **§2, gone seen twice**, on every answer: ``gone`` is believed on the second consecutive
  answer that says it, never on the first (the model counts the sightings itself).
- **§2, a lost row**, on every answer: ``reclaimed``, or a believed ``gone``, ends the
  job's attempt as that stop, over a cancel that came first (nothing may be written).

``next_wake`` is asked as the runtime asks it (after each pass of the guard task); checks
ask a copy, as its ``next_wake(now)`` form judges leases as it answers.

Each check has a negative twin: the same search over a core with one rule broken, which must
find a counterexample (``TWINS``). The twins' scope lets claim hooks take time and claims
arrive with a short lease, so that a core counting D from the handler's start, or judging
expiry after clearing the slot, meets the case that tells it apart.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from trioqueue._core.guard_rules import (
    BatchLease,
    Effects,
    GuardCore,
    JobLease,
    OneJob,
    Renewal,
)
from trioqueue._core.rules import StopReason
from trioqueue._core.timing import GRACE, MIN_RETRY, Timing
from trioqueue._core.wire import Verdict

_T = TypeVar("_T")

LOSES_ROW = (StopReason.RECLAIMED, StopReason.GONE)
RENEWING = (Verdict.EXTENDED, Verdict.CANCEL_REQUESTED)
#: One job's deviation from the honest answer; None leaves it out (counts as UNCHANGED).
DEVIATIONS: tuple[Verdict | None, ...] = (
    Verdict.CANCEL_REQUESTED,
    Verdict.RECLAIMED,
    Verdict.GONE,
    None,
)


#: Names of the checks that have no invariant number (docs/protocol.rst §2 and §3).
RETRY = "§2 retry pace"
GONE_TWICE = "§2 gone twice"
ROW_LOST = "§2 row lost"
RESCUE = "§3 in flight"


class Violation(Exception):
    """An invariant failed; ``args[0]`` names it, ``step`` the event that broke it."""

    step = "(the next step)"


#: The in-between instants lie on this grid (s), so that they do not fragment time
#: without end: an event at one starts new deadlines on the grid too.
GRID = 1 / 16

#: V = 2, H = 0.5, D = 1: a batch is renewed four times per lease, its duration stops it
#: half-way through its first lease, and retry pauses range over [0.25 s, H]. Every time
#: the search reaches is a dyadic fraction of a second: exact in floats.
TIMING = Timing(visibility_timeout=2.0, heartbeat_interval=0.5, max_job_duration=1.0)


@dataclass(frozen=True)
class Scope:
    """How far the search goes. Jobs per batch: one entry per batch that may register."""

    name: str
    jobs_per_batch: tuple[int, ...]
    renewals: int
    notices: int = 1
    shutdowns: int = 1
    beats: int = 1
    timing: Timing = TIMING
    grace: float = 0.5  # shutdown grace
    #: Each answer: the honest one, each of these for one job, and (several jobs) nothing.
    deviations: tuple[Verdict | None, ...] = DEVIATIONS
    wedged: int = 2  # calls sent that ignore their timeout
    #: A handler's work ends (``work_ended``: its outcome decided) before its outcome is
    #: written (``job_done``), as in ``batch.py``; else the two are one event.
    writes: bool = False
    #: How long a batch's claim hooks may run after it registers before its handler starts,
    #: each tried: they run in the batch's scope, so D and the fence count for them too
    #: (docs/protocol.rst §4). On the grid, so they start no new fragments of time.
    hooks: tuple[float, ...] = (0.0,)
    #: Leases shorter than V that a claim's rows may have left when its batch registers,
    #: each tried besides V: a claim that waited, or a slow answer (docs/protocol.rst §3, "At
    #: registration"). Under 0.25 s, the first renewal gives up after the fence, so its
    #: answer may come in between (§3, "A renewal in flight").
    short_leases: tuple[float, ...] = ()


@dataclass
class Call:
    """A renewal's driver call still running."""

    renewal: Renewal
    wedged: bool  # ignores its timeout: back late, after abandonment, or never


@dataclass
class World:
    """One point of the search: the real core and everything around it."""

    core: GuardCore
    now: float = 0.0
    calls: dict[int, Call] = field(default_factory=dict)  # by token
    beat_out: bool = False
    poked: bool = False  # the guard task is due to run before time may pass
    # The instant time last stepped towards: ``now < between`` while half-way there.
    between: float | None = None
    registered: int = 0
    sent: int = 0
    wedged: int = 0  # of them, ignoring their timeout
    notices: int = 0
    shutdowns: int = 0
    beats: int = 0
    granted: dict[int, float] = field(default_factory=dict)  # the database's lease, per job
    cancel_flag: frozenset[int] = frozenset()  # rows whose cancel flag is set
    stopped: dict[int, int] = field(default_factory=dict)  # appearances in Effects.stops
    cancelled: dict[int, int] = field(default_factory=dict)  # appearances in Effects.cancels
    registered_at: dict[int, float] = field(default_factory=dict)  # by batch: D counts from it
    handler_at: dict[int, float] = field(default_factory=dict)  # by batch, while hooks run
    # Jobs the last answer the core accepted for them said ``gone`` of (one sighting).
    gone_once: frozenset[int] = frozenset()


# -- cloning and the canonical key ----------------------------------------------------------


_BATCH_FIELDS = [f.name for f in dataclasses.fields(BatchLease) if f.name != "jobs"]
_JOB_FIELDS = [f.name for f in dataclasses.fields(JobLease)]
#: Types whose values are never changed in place: shared by a copy, not copied.
_SHARED = {int, float, bool, str, type(None), tuple, frozenset, Renewal, Timing, StopReason}


def _copied(value: object) -> object:
    """A copy of a field's value that shares nothing mutable with the original, whatever
    fields the core's classes gain: the model must never let one world change another."""
    kind = type(value)
    if kind in _SHARED or isinstance(value, enum.Enum):
        return value
    copier = _COPIERS.get(kind)
    return copy.deepcopy(value) if copier is None else copier(value)


def _copy_fields(obj: _T, names: list[str]) -> _T:
    # Field by field: ``dataclasses.replace`` re-runs ``__init__`` and costs twice as much.
    new = object.__new__(type(obj))
    for name in names:
        value = getattr(obj, name)
        setattr(new, name, value if type(value) in _SHARED else _copied(value))
    return new


def _copy_job(job: JobLease) -> JobLease:
    return _copy_fields(job, _JOB_FIELDS)


def _copy_batch(batch: BatchLease) -> BatchLease:
    new = _copy_fields(batch, _BATCH_FIELDS)
    new.jobs = {j: _copy_job(job) for j, job in batch.jobs.items()}
    return new


_COPIERS: dict[type, Callable[[Any], object]] = {
    BatchLease: _copy_batch,
    JobLease: _copy_job,
    OneJob: lambda jobs: {j: _copy_job(job) for j, job in jobs.items()},
    # The type test inline: most values are numbers or tuples, and a call each costs.
    dict: lambda mapping: {k: v if type(v) in _SHARED else _copied(v) for k, v in mapping.items()},
    list: lambda items: [v if type(v) in _SHARED else _copied(v) for v in items],
    set: set,
}


def clone_core(core: GuardCore) -> GuardCore:
    """A copy of the core that shares only immutable parts (renewals, timing): every field
    is copied by what it holds, not by its name, so a field the core gains is copied too."""
    new = object.__new__(type(core))
    fields = vars(new)
    fields.update(vars(core))
    for name, value in fields.items():
        if type(value) not in _SHARED:
            fields[name] = _copied(value)
    return new


def next_wake(core: GuardCore, now: float, *, judge: bool = False) -> float:
    """The core's ``next_wake(now)`` (as ``guard.py`` asks it after each pass). It judges
    the leases it looks at as it answers (docs/protocol.rst §10, refinement 16), and a check
    must not change the world it checks, so it is asked of a copy unless ``judge`` says the
    runtime asks (the guard task, after each pass)."""
    return (core if judge else clone_core(core)).next_wake(now)


def clone(world: World) -> World:
    """A copy of the world: its core cloned, each of its dicts copied (their values are
    never changed in place), the rest shared (immutable)."""
    new = object.__new__(World)  # not ``replace``: that re-runs ``__init__``, at twice the cost
    fields = vars(new)
    fields.update(vars(world))
    for name, value in fields.items():
        if type(value) is dict:
            fields[name] = dict(value)
    new.core = clone_core(world.core)
    return new


def _renewal_key(renewal: Renewal | None, now: float) -> object:
    if renewal is None:
        return None
    return (renewal.batch_ids, renewal.items, renewal.sent_at - now, renewal.give_up_at - now)


def _batch_key(core: GuardCore, batch: BatchLease, now: float) -> object:
    """A batch as far as it can still matter: a lost lease, a stop already frozen or a
    batch with nothing left to renew make some of its times irrelevant for good."""
    jobs = tuple(
        (j.job_id, j.pending, j.gone_seen, j.stop, j.renewed, j.ended) for j in batch.jobs.values()
    )
    if batch.lost:  # nothing of it is read again but its jobs (job_done)
        return (batch.batch_id, jobs, "lost")
    # Only an unfrozen stop is still judged against the duration deadline.
    duration = batch.duration_deadline - now if batch.stop is None else None
    schedule = None
    if any(j.renewed for j in batch.jobs.values()):
        scheduled = (batch.next_due, batch.batch_id) in core._due
        # Whether its first beat went out matters only while a job's work has ended.
        beaten = batch.beaten if any(j.ended and j.pending for j in batch.jobs.values()) else None
        schedule = (batch.next_due - now, scheduled, batch.wanted, beaten)
    return (batch.batch_id, jobs, batch.lease_deadline - now, duration, schedule, batch.stop)


def _role(core: GuardCore, token: int) -> str:
    if core.current is not None and core.current.token == token:
        return "current"
    if core.abandoned is not None and core.abandoned.token == token:
        return "abandoned"
    return "orphan"  # running, yet the core forgot it (only a broken core does that)


def key(world: World) -> object:
    """Everything that decides the future, times relative to ``now``, tokens by role."""
    w, core, now = world, world.core, world.now
    h = core.timing.heartbeat_interval
    # Past its give-up time a call may come back at any moment; how long ago does not matter.
    calls = tuple(
        sorted(
            (_role(core, t), c.wedged, max(c.renewal.give_up_at - now, 0.0))
            for t, c in world.calls.items()
        )
    )
    running = {j for b in core._batches.values() if not b.lost for j in b.jobs}
    renewed = {j for b in core._batches.values() for j, job in b.jobs.items() if job.renewed}
    # Only a batch whose scope has not fired is judged against its registration + D (I4).
    registered = world.registered_at
    live = tuple((b, registered[b] - now) for b, x in core._batches.items() if x.stop is None)
    return (
        _renewal_key(core.current, now),
        core.abandoned is not None,  # only its token is read again
        core.beating,
        core.shutdown_at - now,
        None if core._anchor is None else (now - core._anchor) % h,
        min(core._last_duration, h / 2),  # read only as the look-ahead, at most H / 2
        tuple(_batch_key(core, b, now) for b in core._batches.values()),
        calls,
        world.beat_out,
        world.poked,
        None if world.between is None else world.between - now,
        (w.registered, w.sent, w.wedged, w.notices, w.shutdowns, w.beats),
        tuple(sorted((j, g - now) for j, g in world.granted.items() if j in running)),
        world.cancel_flag & renewed,
        tuple(sorted(world.stopped.items())),
        tuple(sorted(world.cancelled.items())),
        live,  # in registration order, as the batches are
        tuple((b, t - now) for b, t in world.handler_at.items()) if world.handler_at else (),
        world.gone_once & renewed & running,  # the verdicts of a lost batch count no more
    )


def snapshot(core: GuardCore) -> object:
    """Every field of the core, for before/after equality (I6)."""
    batches = tuple(
        (
            tuple(getattr(b, name) for name in _BATCH_FIELDS),
            tuple(tuple(getattr(j, name) for name in _JOB_FIELDS) for j in b.jobs.values()),
        )
        for b in core._batches.values()
    )
    rest = {k: v for k, v in vars(core).items() if k not in ("_batches", "_due", "_job_batch")}
    return (batches, sorted(core._due), sorted(core._job_batch.items()), sorted(rest.items()))


# -- the checks ----------------------------------------------------------------------------


@contextmanager
def labelled(step: str) -> Iterator[None]:
    """Name the event in a violation raised while it is carried out."""
    try:
        yield
    except Violation as exc:
        exc.step = step
        raise


def require(ok: bool, invariant: str, detail: str) -> None:
    if not ok:
        raise Violation(f"{invariant}: {detail}")


def runs_with_its_row(job: JobLease) -> bool:
    """Its handler has not exited, and its row was not reclaimed or found gone."""
    return job.pending and job.stop not in LOSES_ROW


def check_state(world: World) -> None:
    check_connections(world)
    check_stale_answers(world)
    check_still_renewed(world)
    check_fence_granted(world)
    check_duration(world)


def check_connections(world: World) -> None:
    """I5: at most two connections, counted by the core and by the calls really running."""
    core = world.core
    held = core.connections_held()
    running = len(world.calls) + world.beat_out
    require(held <= 2, "I5", f"the core holds {held} connections")
    require(running <= 2, "I5", f"{running} driver calls hold a connection")
    require(running == held, "I5", f"{running} calls running, the core counts {held}")
    require(core.beating == world.beat_out, "I5", "the core's beat is not the one out")


def check_stale_answers(world: World) -> None:
    """I6: a token neither current nor abandoned (settled or never issued) changes nothing."""
    core, now = world.core, world.now
    live = {r.token for r in (core.current, core.abandoned) if r is not None}
    verdicts = dict.fromkeys(world.granted, Verdict.RECLAIMED)
    before = snapshot(core)
    # The core tells tokens apart only as live or not: a settled one, the newest that is
    # not live, and two never issued (before the first, the next one) stand for them all.
    settled = [t for t in range(1, core._next_token) if t not in live][-1:]
    for token in [0, *settled, core._next_token]:
        answered = core.answered(token, now, verdicts)
        failed = core.failed(token, now)
        require(answered == failed == Effects(), "I6", f"token {token} had effects")
    require(snapshot(core) == before, "I6", "an answer for a stale token changed the core")


def check_still_renewed(world: World) -> None:
    """§4: a batch with a handler running on a row still leased stays renewed."""
    core, now = world.core, world.now
    h = core.timing.heartbeat_interval
    current = core.current
    for b, batch in core._batches.items():
        if core.fence_time(batch) <= now:
            continue  # the lease is lost: only the fence ends renewals early
        if not any(runs_with_its_row(job) for job in batch.jobs.values()):
            continue
        if current is not None and b in current.batch_ids:
            continue
        what = f"batch {b} (stop {batch.stop}) with a handler running"
        require((batch.next_due, b) in core._due, "§4", f"{what} is not scheduled")
        require(batch.next_due <= now + h, "§4", f"{what} is due only at {batch.next_due}")
        # Due at or after its fence, it would be lost by then: no wake is owed for it, though
        # it may still ride along before (docs/protocol.rst §10, the guard's next wake).
        if current is None and batch.next_due < batch.lease_deadline:
            wake = next_wake(core, now)
            require(wake <= batch.next_due, "§4", f"the guard sleeps past {what}")


def check_fence_granted(world: World) -> None:
    """I2: the fence ends by the database's lease of every running job."""
    core = world.core
    for b, batch in core._batches.items():
        running = [j.job_id for j in batch.jobs.values() if runs_with_its_row(j)]
        if not running:
            continue
        granted = min(world.granted[j] for j in running)
        in_flight = core.current is not None and b in core.current.batch_ids
        fence = core.fence_time(batch)
        require(
            fence <= granted + (GRACE if in_flight else 0.0),
            "I2",
            f"batch {b}: fence {fence} past the granted {granted}",
        )


def check_duration(world: World) -> None:
    """I4: no claim hook or handler runs past its batch's registration + D. While any of
    them may still run and the scope has not fired, its deadline is no later than that, so
    it fires by then (time never steps past a scope deadline)."""
    core = world.core
    d = core.timing.max_job_duration
    if d is None:
        return
    for b, batch in core._batches.items():
        if batch.stop is not None or not any(job.pending for job in batch.jobs.values()):
            continue  # its scope fired (for good), or nothing of it runs any more
        limit = world.registered_at[b] + d
        deadline = core.scope_deadline(b)
        hooks = " (its claim hooks still running)" if b in world.handler_at else ""
        what = f"batch {b}{hooks}: scope deadline {deadline} past registration + D = {limit}"
        require(deadline <= limit, "I4", what)


def check_retry_pace(
    core: GuardCore, batch_ids: Iterable[int], now: float, confirming: Iterable[int] = ()
) -> None:
    """§2: a batch whose renewal failed, was abandoned or did not renew every job is tried
    again after ``min(H, max(0.25 s, remaining / 2))`` (so at least 0.25 s on, and within
    ``H``), ``remaining`` the time left on its lease; one ``confirming`` a first ``gone``
    after 0.25 s; one a cancel notice waits for at once (§10, refinement 6)."""
    h = core.timing.heartbeat_interval
    for b in batch_ids:
        batch = core._batches.get(b)
        if batch is None or batch.lost:
            continue
        if batch.wanted:
            pause = 0.0
        elif b in confirming:
            pause = MIN_RETRY
        else:
            pause = min(h, max(MIN_RETRY, (batch.lease_deadline - now) / 2))
        due = batch.next_due - now
        require(due == pause, RETRY, f"batch {b} retried {due} s after {now}, not {pause} s")


def check_answer(
    core: GuardCore,
    renewal: Renewal,
    before: dict[int, BatchLease],
    verdicts: dict[int, Verdict],
    world: World,
) -> None:
    """What an answer the core accepted must have done: the in-flight rescue (§3), the retry
    pace of a batch it did not renew (§2), ``gone`` believed on its second consecutive
    sighting only, and a row lost to ``reclaimed`` or ``gone`` whatever stopped its job."""
    now = world.now
    retried, confirming = [], []
    gone_once = set(world.gone_once)
    for b, old in before.items():
        if old.lost:
            continue  # its answer changes nothing (frozen: ``check_frozen``)
        batch = core._batches[b]
        carried = [j for j, job in old.jobs.items() if job.renewed]
        renewed_all = all(verdicts.get(j) in RENEWING for j in carried)
        check_rescue(core, renewal, old, batch, now, renewed_all=bool(carried) and renewed_all)
        if batch.lost:
            gone_once -= set(carried)  # a lost batch's verdicts do not count
            continue
        for j in carried:
            verdict = verdicts.get(j)
            check_row_lost(j, verdict, batch.jobs[j], j in gone_once)
            if counts_as_failed(verdict, j in gone_once):
                retried.append(b)
            if verdict is Verdict.GONE and j not in gone_once:
                gone_once.add(j)
                confirming.append(b)
                confirm = batch.next_due - now
                due = f"job {j}: the renewal to confirm its first gone is due {confirm} s later"
                require(batch.wanted or confirm <= MIN_RETRY, GONE_TWICE, due)
            else:
                gone_once.discard(j)
    check_retry_pace(core, retried, now, confirming)
    world.gone_once = frozenset(gone_once)


def counts_as_failed(verdict: Verdict | None, seen_gone: bool) -> bool:
    """Neither renewed nor lost: left out, ``unchanged``, or a first ``gone`` (§2)."""
    lost = verdict is Verdict.RECLAIMED or (verdict is Verdict.GONE and seen_gone)
    return verdict not in RENEWING and not lost


def check_rescue(
    core: GuardCore,
    renewal: Renewal,
    old: BatchLease,
    batch: BatchLease,
    now: float,
    *,
    renewed_all: bool,
) -> None:
    """§3, "A renewal in flight": sent before the fence, a renewal holds the fence until
    its give-up time. An answer before then that renews every job extends the fence, even
    after the old lease ran out; one at or after it finds the fence fired, for good."""
    lease = old.lease_deadline
    fence = max(lease, renewal.give_up_at) if renewal.sent_at < lease else lease
    v = core.timing.visibility_timeout
    b = old.batch_id
    if now >= fence:
        kept = not batch.lost or batch.lease_deadline != lease
        require(not kept, RESCUE, f"batch {b} answered at {now}, its fence {fence}, kept its lease")
    elif now >= lease and renewed_all:
        rescued = not batch.lost and batch.lease_deadline >= renewal.sent_at + v
        what = f"batch {b} renewed at {now} in flight past its lease {lease}, before {fence}"
        require(rescued, RESCUE, f"{what}: not extended")


def check_row_lost(job_id: int, verdict: Verdict | None, job: JobLease, seen_gone: bool) -> None:
    """``gone`` is believed on its second consecutive sighting only (§2, "Why gone needs two
    sightings"); ``reclaimed`` and a believed ``gone`` end the job's attempt as that stop,
    over a cancel that came first: the row is not ours, so nothing may be written (§4,
    "Outcomes by reason")."""
    if verdict is Verdict.GONE:
        believed = not job.renewed or job.stop is StopReason.GONE
        when = "second" if seen_gone else "first"
        require(
            believed == seen_gone, GONE_TWICE, f"job {job_id}: {when} gone, believed {believed}"
        )
    if verdict is Verdict.RECLAIMED or (verdict is Verdict.GONE and seen_gone):
        reason = StopReason.RECLAIMED if verdict is Verdict.RECLAIMED else StopReason.GONE
        require(job.stop is reason, ROW_LOST, f"job {job_id}: {verdict.value}, its stop {job.stop}")


def stops_of(core: GuardCore) -> dict[int, tuple[StopReason | None, bool, dict[int, object]]]:
    return {
        b: (batch.stop, batch.lost, {j: job.stop for j, job in batch.jobs.items()})
        for b, batch in core._batches.items()
    }


def check_frozen(
    before: dict[int, tuple[StopReason | None, bool, dict[int, object]]], core: GuardCore
) -> None:
    """I8 across one transition: a stop, a lost lease and a lost row are for good."""
    for b, (stop, lost, jobs) in before.items():
        batch = core._batches.get(b)
        if batch is None:
            continue
        require(stop is None or batch.stop is stop, "I8", f"batch {b}: {stop} became {batch.stop}")
        require(not lost or batch.lost, "I8", f"batch {b}: a lost lease came back")
        for j, was in jobs.items():
            if was in LOSES_ROW:
                require(batch.jobs[j].stop is was, "I8", f"job {j}: {was} changed")


def absorb(world: World, effects: Effects) -> None:
    """Carry out the effects as the runtime does, checking I8 (and the abandon rule, I5)."""
    core = world.core
    for b, j, _reason in effects.stops:
        world.stopped[j] = world.stopped.get(j, 0) + 1
        require(world.stopped[j] == 1, "I8", f"job {j} stopped twice")
        require(core._batches[b].stop is None, "I8", f"job {j} stopped on a stopped batch")
    for _b, j in effects.cancels:
        world.cancelled[j] = world.cancelled.get(j, 0) + 1
        require(world.cancelled[j] == 1, "I8", f"job {j} cancelled twice")
    if effects.abandoned is not None:
        call = world.calls.get(effects.abandoned)
        require(call is not None, "I5", "abandoned a call that is not running")
        assert call is not None
        require(world.now >= call.renewal.abandon_at, "I5", "abandoned before give-up + grace")
        check_retry_pace(core, call.renewal.batch_ids, world.now)  # abandoned counts as failed


# -- the events ----------------------------------------------------------------------------

Step = tuple[str, World]


def guard_runs(world: World, scope: Scope) -> Iterator[Step]:
    """The guard task wakes: ``poll``, then sends the renewal the core offers, if any."""
    w = clone(world)
    core, now = w.core, w.now
    w.poked = False
    absorb(w, core.poll(now))
    if w.sent >= scope.renewals:
        yield "guard runs (renewal budget spent)", w
        return
    due = set() if core.current is not None else due_batches(core, now)
    # A first beat is owed to running work only (docs/protocol.rst §10): a due batch whose
    # every renewed job's work has ended may be passed over, due again within H.
    waivable = {b for b in due if first_beat_waivable(core.batch(b))}
    renewal = core.next_renewal(now)
    waived = due - (set() if renewal is None else renewal.batch_ids)
    require(waived <= waivable, "§4", f"due {sorted(waived)} with work running, not sent")
    for b in waived:
        next_due = core.batch(b).next_due
        h = core.timing.heartbeat_interval
        require(now < next_due <= now + h, "§4", f"batch {b}'s first beat waived, due {next_due}")
    next_wake(core, now, judge=True)  # guard.py asks it after each pass, to sleep until then
    if renewal is None:
        yield "guard runs", w
        return
    w.sent += 1
    for wedged in (False, True)[: 1 + (w.wedged < scope.wedged)]:
        sent = clone(w)
        sent.calls[renewal.token] = Call(renewal, wedged)
        sent.wedged += wedged
        how = "wedged" if wedged else "interruptible"
        yield f"guard sends renewal {renewal.token} of {sorted(renewal.batch_ids)} ({how})", sent


def first_beat_waivable(batch: BatchLease) -> bool:
    """Before its first beat, with no cancel notice waiting, every renewed job ended."""
    renewed = [job for job in batch.jobs.values() if job.renewed]
    return not batch.beaten and not batch.wanted and all(job.ended for job in renewed)


def due_batches(core: GuardCore, now: float) -> set[int]:
    """Batches scheduled by now whose lease is live and which have a job to renew."""
    return {
        b
        for b, batch in core._batches.items()
        if (batch.next_due, b) in core._due
        and batch.next_due <= now
        and core.fence_time(batch) > now
        and any(job.renewed for job in batch.jobs.values())
    }


def verdict_choices(
    world: World, renewal: Renewal, deviations: tuple[Verdict | None, ...]
) -> Iterator[tuple[str, dict[int, Verdict]]]:
    """The honest answer, each single-job deviation from it, and an empty answer."""
    honest = {
        item.job_id: Verdict.CANCEL_REQUESTED
        if item.job_id in world.cancel_flag
        else Verdict.EXTENDED
        for item in renewal.items
    }
    yield "all renewed", honest
    for item in renewal.items:
        for deviation in deviations:
            if deviation is honest[item.job_id]:
                continue
            verdicts = dict(honest)
            if deviation is None:
                del verdicts[item.job_id]
            else:
                verdicts[item.job_id] = deviation
            name = "left out" if deviation is None else deviation.value
            yield f"job {item.job_id} {name}", verdicts
    if len(renewal.items) > 1:
        yield "nothing", {}


def call_returns(world: World, scope: Scope) -> Iterator[Step]:
    """A running driver call comes back: answer, error, or (interruptible) its timeout."""
    for token, call in world.calls.items():
        if call.wedged != (world.now > call.renewal.give_up_at):
            # An interruptible call is back by its give-up time (move_on_at); a wedged one
            # is told apart only by coming back later (earlier, it is an interruptible one).
            continue
        is_current = world.core.current is not None and world.core.current.token == token
        if is_current:
            for name, verdicts in verdict_choices(world, call.renewal, scope.deviations):
                yield from answer(world, token, name, verdicts)
        else:  # what it says must not matter (I6): two answers and an error suffice
            yield from late_exit(world, token)
        yield from fail(world, token)


def answer(world: World, token: int, name: str, verdicts: dict[int, Verdict]) -> Iterator[Step]:
    w = clone(world)
    core, now = w.core, w.now
    renewal = w.calls.pop(token).renewal
    w.poked = True
    v = core.timing.visibility_timeout
    w.cancel_flag |= {j for j, x in verdicts.items() if x is Verdict.CANCEL_REQUESTED}
    before = {b: _copy_batch(core._batches[b]) for b in renewal.batch_ids if b in core._batches}
    old_jobs = {b: batch.jobs for b, batch in before.items()}
    effects = core.answered(token, now, verdicts)
    for item in renewal.items:  # the database renewed these no earlier than the send
        if verdicts.get(item.job_id) in RENEWING and item.job_id in w.granted:
            w.granted[item.job_id] = max(w.granted[item.job_id], renewal.sent_at + v)
    label = f"renewal {token} answers at {now}: {name}"
    with labelled(label):
        absorb(w, effects)
        check_verdicts_count(core, renewal, before, old_jobs, verdicts)
        check_answer(core, renewal, before, verdicts, w)
    yield label, w


def check_verdicts_count(
    core: GuardCore,
    renewal: Renewal,
    before: dict[int, BatchLease],
    old_jobs: dict[int, Mapping[int, JobLease]],
    verdicts: dict[int, Verdict],
) -> None:
    """§4: an answer in time counts for every batch it carried, stopped or not."""
    v = core.timing.visibility_timeout
    for b, old in before.items():
        batch = core._batches[b]
        if batch.lost:
            continue
        carried = [j for j, job in old_jobs[b].items() if job.renewed]
        renewed_all = all(verdicts.get(j) in RENEWING for j in carried)
        expected = max(old.lease_deadline, renewal.sent_at + v) if renewed_all else None
        if expected is not None:
            require(
                batch.lease_deadline >= expected,
                "§4",
                f"batch {b} (stop {old.stop}) renewed by every verdict, lease not extended",
            )
        for j in carried:
            if verdicts.get(j) is Verdict.RECLAIMED:
                require(not batch.jobs[j].renewed, "§4", f"job {j}: reclaimed, still renewed")


def fail(world: World, token: int) -> Iterator[Step]:
    w = clone(world)
    call = w.calls.pop(token)
    w.poked = True
    role = _role(w.core, token)
    expected = {"current": None, "abandoned": abandoned_exit(w), "orphan": snapshot(w.core)}[role]
    at_timeout = not call.wedged and w.now == call.renewal.give_up_at
    label = f"renewal {token} {'times out' if at_timeout else 'fails'} at {w.now}"
    with labelled(label):
        absorb(w, w.core.failed(token, w.now))
        if expected is not None:
            late = f"the late failure of {token} changed the core"
            require(snapshot(w.core) == expected, "I6", late)
        else:
            check_retry_pace(w.core, call.renewal.batch_ids, w.now)
    yield label, w


def abandoned_exit(world: World) -> object:
    """What the core must look like after the abandoned call exits: its slot freed, then a
    poll (docs/protocol.rst §6), and nothing else."""
    core = clone_core(world.core)
    core.abandoned = None
    core.poll(world.now)
    return snapshot(core)


def late_exit(world: World, token: int) -> Iterator[Step]:
    """The abandoned (or an orphaned) call answers late: it must count as a mere exit."""
    for name, verdicts in (
        ("all renewed", dict.fromkeys(world.granted, Verdict.EXTENDED)),
        ("all reclaimed", dict.fromkeys(world.granted, Verdict.RECLAIMED)),
    ):
        w = clone(world)
        w.calls.pop(token)
        w.poked = True
        expected = abandoned_exit(w) if _role(w.core, token) == "abandoned" else snapshot(w.core)
        label = f"renewal {token} answers late at {w.now}: {name}"
        with labelled(label):
            absorb(w, w.core.answered(token, w.now, verdicts))
            late = f"the late answer of {token} changed the core"
            require(snapshot(w.core) == expected, "I6", late)
        yield label, w


def register(world: World, scope: Scope) -> Iterator[Step]:
    """A batch registers, with each lease its claim may have left and each time its claim
    hooks may take before its handler starts."""
    core = world.core
    if world.registered >= len(scope.jobs_per_batch) or core.shutdown_at != math.inf:
        return
    if world.between is not None and world.now < world.between:
        return  # batches register at the instants only
    v = scope.timing.visibility_timeout
    for lease in (v, *scope.short_leases):
        for hooks in scope.hooks:
            yield registered(world, scope, lease, hooks)


def registered(world: World, scope: Scope, lease: float, hooks: float) -> Step:
    w = clone(world)
    core, now = w.core, w.now
    b = w.registered + 1
    jobs = [(10 * b + i, 1) for i in range(scope.jobs_per_batch[b - 1])]
    # The claim's own lease: its rows locked at once, leased until ``now + lease``.
    accepted = core.register(
        b, jobs, claim_sent=now, now=now, wall_now=now, row_deadlines=[now + lease] * len(jobs)
    )
    require(accepted, "I7", f"batch {b} refused with a live lease")
    w.registered = b
    w.registered_at[b] = now
    if hooks:
        w.handler_at[b] = now + hooks
    w.poked = True
    for j, _ in jobs:
        w.granted[j] = now + lease
    how = [f"{lease} s of lease"] if lease != scope.timing.visibility_timeout else []
    how += [f"claim hooks for {hooks} s"] if hooks else []
    return f"batch {b} registers at {now}{''.join(f', {h}' for h in how)}", w


def handler_starts(world: World) -> Iterator[Step]:
    """A batch's claim hooks return and its handlers start, unless its scope fired first
    (then the hooks were cancelled, and no handler runs)."""
    for b, at in world.handler_at.items():
        if world.now < at:
            continue
        w = clone(world)
        del w.handler_at[b]
        core, now = w.core, w.now
        if core.scope_deadline(b) <= now:
            yield f"batch {b}'s claim hooks are cancelled at {now}", w
            continue
        # The real core is told nothing: D counts from registration (docs/protocol.rst §4).
        # A core that counted it from here would need to hear of it, as a runtime written
        # for it would tell it: the model does, if the core listens (a twin does).
        listener = getattr(core, "handler_started", None)
        if listener is not None:
            listener(b, now)
        yield f"batch {b}'s claim hooks return at {now}, its handlers start", w


def work_ends(world: World, scope: Scope) -> Iterator[Step]:
    """A handler exits and its outcome is decided; writing it is still to come."""
    if not scope.writes or (world.between is not None and world.now < world.between):
        return
    for b, batch in world.core._batches.items():
        for j, job in batch.jobs.items():
            if not job.pending or job.ended:
                continue
            w = clone(world)
            core, now = w.core, w.now
            if core.scope_deadline(b) <= now and job.stop is None:
                core.batch_stop(b, now)  # batch.py decides the outcome from it
            core.work_ended(b, j)
            yield f"job {j} handler exits at {now}, its outcome unwritten", w


def job_done(world: World, scope: Scope) -> Iterator[Step]:
    """A handler exits (whenever: a stopped one may unwind for long) and its outcome is
    written; with ``scope.writes``, the write of an outcome decided earlier lands."""
    if world.between is not None and world.now < world.between:
        return  # half-way, it would see what it sees at the instant before (no new times)
    for b, batch in world.core._batches.items():
        for j, job in batch.jobs.items():
            if not job.pending or (scope.writes and not job.ended):
                continue
            w = clone(world)
            core, now = w.core, w.now
            if not scope.writes and core.scope_deadline(b) <= now and job.stop is None:
                core.batch_stop(b, now)  # batch.py decides the outcome from it
            core.job_done(b, j)
            del w.granted[j]
            if not any(job.pending for job in core._batches[b].jobs.values()):
                core.unregister(b)
                w.handler_at.pop(b, None)
                del w.registered_at[b]
            yield f"job {j} {'outcome written' if scope.writes else 'handler exits'} at {now}", w


def notice(world: World, scope: Scope) -> Iterator[Step]:
    if world.notices >= scope.notices:
        return
    for batch in world.core._batches.values():
        for j in batch.jobs:
            w = clone(world)
            w.notices += 1
            w.cancel_flag |= {j}
            if w.core.request_renewal(j, w.now):
                w.poked = True
            yield f"cancel notice for job {j} at {w.now}", w


def shutdown(world: World, scope: Scope) -> Iterator[Step]:
    if world.shutdowns >= scope.shutdowns:
        return
    w = clone(world)
    w.shutdowns += 1
    absorb(w, w.core.begin_shutdown(w.now, scope.grace))
    yield f"shutdown begins at {w.now}", w


def beats(world: World, scope: Scope) -> Iterator[Step]:
    if world.beat_out:
        w = clone(world)
        w.beat_out = False
        w.poked = True
        absorb(w, w.core.end_beat(w.now))
        yield f"lone beat exits at {w.now}", w
    elif world.beats < scope.beats and world.core.connections_held() == 0:
        w = clone(world)
        w.beats += 1
        require(w.core.begin_beat(), "I5", "a lone beat refused with no connection held")
        w.beat_out = True
        yield f"lone beat goes at {w.now}", w


def instants(world: World) -> list[float]:
    """Every instant after now at which a comparison the core makes can change."""
    core, now = world.core, world.now
    times = [next_wake(core, now), core.shutdown_at, *world.handler_at.values()]
    for renewal in (core.current, core.abandoned):
        if renewal is not None:
            times += [renewal.give_up_at, renewal.abandon_at]
    for b, batch in core._batches.items():
        times += [
            core.fence_time(batch),
            batch.lease_deadline,
            batch.duration_deadline,
            batch.next_due,
            core.scope_deadline(b),
        ]
    return sorted(t for t in times if now < t < math.inf)


def advance(world: World) -> Iterator[Step]:
    """Time passes: to the next instant, or half-way there (once per instant)."""
    if world.poked:
        return  # the guard runs first
    for call in world.calls.values():
        if not call.wedged and world.now >= call.renewal.give_up_at:
            return  # the interruptible call returns at its give-up time first
    if any(at <= world.now for at in world.handler_at.values()):
        return  # the hooks that end now return first
    future = instants(world)
    if not future:
        return
    target = future[0]
    choices = [(target, f"time passes to {target}")]
    # Half-way, on the grid: one instant strictly inside the interval, if the grid has one.
    half = math.floor((world.now + target) / 2 / GRID) * GRID
    if world.calls and world.between != target and world.now < half:
        choices.append((half, f"time passes to {half}, half-way to {target}"))
    for when, name in choices:
        w = clone(world)
        w.now = when
        w.between = target
        w.poked = when >= next_wake(w.core, when)
        yield name, w


def successors(world: World, scope: Scope) -> Iterator[Step]:
    if world.sent >= scope.renewals and world.core.current is None:
        return  # the run ends once its last statement has settled or been abandoned
    events: list[tuple[str, Iterator[Step]]] = [
        ("a call returns", call_returns(world, scope)),
        ("a batch registers", register(world, scope)),
        ("a handler starts", handler_starts(world)),
        ("a handler exits", work_ends(world, scope)),
        ("an outcome is written", job_done(world, scope)),
        ("a cancel notice", notice(world, scope)),
        ("shutdown", shutdown(world, scope)),
        ("a lone beat", beats(world, scope)),
        ("time passes", advance(world)),
    ]
    if world.poked:
        events.insert(0, ("the guard runs", guard_runs(world, scope)))
    for name, steps in events:
        try:
            yield from steps
        except Violation as exc:
            if exc.step == Violation.step:
                exc.step = f"{name} at {world.now}"
            raise


# -- the search ----------------------------------------------------------------------------


@dataclass
class Result:
    scope: str
    core: str
    states: int
    transitions: int
    depth: int
    seconds: float
    violation: str | None = None
    trace: list[str] = field(default_factory=list)


def explore(
    scope: Scope, make_core: Callable[[Timing], GuardCore] = GuardCore, limit: int = 10**7
) -> Result:
    """Breadth-first search of every world reachable within the scope (at most ``limit``
    states: a search cut short says so in its result)."""
    began = time.perf_counter()
    start = World(core=make_core(scope.timing))
    first = key(start)
    parent: dict[object, tuple[object, str] | None] = {first: None}
    depth = {first: 0}
    queue: deque[tuple[object, World]] = deque([(first, start)])
    transitions = 0
    name = getattr(make_core, "__name__", "GuardCore")

    def result(violation: str | None = None, trace: list[str] | None = None) -> Result:
        took = time.perf_counter() - began
        deepest = max(depth.values())
        return Result(
            scope.name, name, len(parent), transitions, deepest, took, violation, trace or []
        )

    def trace_to(k: object, last: str) -> list[str]:
        steps = [last]
        link = parent[k]
        while link is not None:
            k, label = link
            steps.append(label)
            link = parent[k]
        return steps[::-1]

    while queue:
        if len(parent) > limit:
            return result(f"cut short after {limit} states")
        k, world = queue.popleft()
        frozen = stops_of(world.core)
        steps = successors(world, scope)
        while True:
            try:
                label, nxt = next(steps)
            except StopIteration:
                break
            except Violation as exc:
                return result(str(exc), trace_to(k, exc.step))
            transitions += 1
            nk = key(nxt)
            try:
                check_frozen(frozen, nxt.core)
                if nk not in parent:
                    check_state(nxt)
            except Violation as exc:
                return result(str(exc), trace_to(k, label))
            if nk not in parent:
                parent[nk] = (k, label)
                depth[nk] = depth[k] + 1
                queue.append((nk, nxt))
    return result()


# -- the negative twins: one rule broken each ------------------------------------------------


class AbandonsWithoutSlot(GuardCore):
    """Abandons a stuck renewal even while another one (or a lone beat) holds the spare
    connection: I5 must fail."""

    def _slot_taken(self) -> bool:
        return False


class AcceptsStaleTokens(GuardCore):
    """Settles the current renewal with any token: I6 must fail."""

    def _settle(self, token: int, now: float) -> Renewal | None:
        current = self.current
        if current is None:
            return None
        return super()._settle(current.token, now)


class DropsStoppedBatches(GuardCore):
    """Stops renewing a batch once its scope is stopped: §4 must fail."""

    @staticmethod
    def _renewable(batch: BatchLease) -> bool:
        return batch.stop is None and not batch.lost and any(j.renewed for j in batch.jobs.values())


class IgnoresStoppedVerdicts(GuardCore):
    """Ignores the verdicts for a stopped batch: §4 (its verdicts count) must fail."""

    def _apply_verdicts(
        self,
        batch: BatchLease,
        renewal: Renewal,
        now: float,
        verdicts: Mapping[int, Verdict],
        effects: Effects,
    ) -> None:
        if batch.stop is None:
            super()._apply_verdicts(batch, renewal, now, verdicts, effects)
        else:
            self._schedule_retry(batch, now)


class StopsStoppedBatches(GuardCore):
    """Delivers a job's stop even when its batch's scope already stopped it: I8 must fail."""

    @staticmethod
    def _stop_job(batch: BatchLease, job: JobLease, reason: StopReason, effects: Effects) -> None:
        job.renewed = False
        job.stop = reason
        effects.stops.append((batch.batch_id, job.job_id, reason))


class LeaseFromAnswer(GuardCore):
    """Counts a renewed lease from the answer's arrival, not the send: I2 must fail."""

    def answered(self, token: int, now: float, verdicts: Mapping[int, Verdict]) -> Effects:
        current = self.current
        if current is not None and current.token == token:
            self.current = replace(current, sent_at=now)
        return super().answered(token, now, verdicts)


class WaivesRunningWork(GuardCore):
    """Passes over every batch's first beat, running work or not: §4 must fail."""

    def _owed_a_beat(self, batch: BatchLease, now: float) -> bool:
        if batch.beaten or batch.wanted:
            return True
        batch.beaten = True
        self._set_due(batch, self._next_beat(now))
        return False


class RetriesWithoutFloor(GuardCore):
    """Retries a failed renewal after ``min(H, remaining / 2)``, without the 0.25 s floor, so
    a lease about to run out is retried in a busy loop: §2's retry pace must fail."""

    def _schedule_retry(self, batch: BatchLease, now: float) -> None:
        remaining = batch.lease_deadline - now
        self._set_due(batch, now + min(self.timing.heartbeat_interval, remaining / 2))


class RetriesAtTheBeat(GuardCore):
    """Retries a failed renewal at the pool's next beat, not sooner as the lease runs down:
    §2's retry pace must fail."""

    def _schedule_retry(self, batch: BatchLease, now: float) -> None:
        self._set_due(batch, self._next_beat(now))


class BelievesGoneAtOnce(GuardCore):
    """Believes ``gone`` on its first sighting, which may be the worker's own ack racing the
    renewal: §2's two sightings must fail."""

    def _apply_verdicts(
        self,
        batch: BatchLease,
        renewal: Renewal,
        now: float,
        verdicts: Mapping[int, Verdict],
        effects: Effects,
    ) -> None:
        for job in batch.jobs.values():
            if verdicts.get(job.job_id) is Verdict.GONE:
                job.gone_seen = True  # as if an earlier answer had said it already
        super()._apply_verdicts(batch, renewal, now, verdicts, effects)


class DurationFromHandlerStart(GuardCore):
    """Counts ``max_job_duration`` from the handler's start, not the batch's registration,
    so the time its claim hooks take is not counted: I4 must fail.

    The real core has no hook for a handler's start: D counts from registration, and
    nothing the runtime says later moves it. A core that counted D from the handler's
    start must be told when that is, so this twin has that hook, which the model calls
    when the claim hooks return (as a runtime written for it would). Its duration deadline
    becomes registration + D + the hooks' time: what every harness that starts handlers
    at registration could not tell apart from the rule.
    """

    def handler_started(self, batch_id: int, now: float) -> None:
        d = self.timing.max_job_duration
        batch = self._batches.get(batch_id)
        if batch is not None and d is not None:
            batch.duration_deadline = now + d


class MaxDurationLate(GuardCore):
    """Stops a batch for ``max_job_duration`` one second late: I4 must fail."""

    def register(self, batch_id: int, jobs: Sequence[tuple[int, int]], **given: Any) -> bool:
        accepted = super().register(batch_id, jobs, **given)
        if accepted:
            self._batches[batch_id].duration_deadline += 1.0
        return accepted


class IgnoresRowLeases(GuardCore):
    """Counts a claimed batch's fence from the claim alone, ignoring the lease its rows
    have left (docs/protocol.rst §3, "At registration"): I2 must fail once a claim arrives
    with less than V."""

    def register(self, batch_id: int, jobs: Sequence[tuple[int, int]], **given: Any) -> bool:
        given["row_deadlines"] = [math.inf] * len(jobs)  # no row's own lease counts
        return super().register(batch_id, jobs, **given)


class ExpiryAfterSlotCleared(GuardCore):
    """Judges expiry after clearing the renewal slot, so the fence no longer waits for the
    renewal's give-up time: an answer in time, after the old lease but before the give-up
    time, finds the batch lost. §3's in-flight rescue must fail."""

    def _settle(self, token: int, now: float) -> Renewal | None:
        current = self.current
        if current is not None and current.token == token:
            self.current = None  # the slot cleared first, then expiry judged
            for batch in self._carried(current):
                self._expire_if_due(batch, now)
            self.current = current
        return super()._settle(token, now)


class ReclaimedKeepsCancel(GuardCore):
    """Keeps a job's earlier ``cancelled`` stop when its row is reclaimed or found gone, so
    its attempt would write a failure to a row no longer its own: §2's lost row must fail."""

    @staticmethod
    def _stop_job(batch: BatchLease, job: JobLease, reason: StopReason, effects: Effects) -> None:
        was = job.stop
        GuardCore._stop_job(batch, job, reason, effects)
        if was is StopReason.CANCELLED:
            job.stop = was


#: (broken core, the invariant its counterexample must name).
TWINS: list[tuple[type[GuardCore], str]] = [
    (AbandonsWithoutSlot, "I5"),
    (AcceptsStaleTokens, "I6"),
    (StopsStoppedBatches, "I8"),
    (DropsStoppedBatches, "§4"),
    (IgnoresStoppedVerdicts, "§4"),
    (LeaseFromAnswer, "I2"),
    (WaivesRunningWork, "§4"),
    (RetriesWithoutFloor, RETRY),
    (RetriesAtTheBeat, RETRY),
    (BelievesGoneAtOnce, GONE_TWICE),
    (DurationFromHandlerStart, "I4"),
    (MaxDurationLate, "I4"),
    (IgnoresRowLeases, "I2"),
    (ExpiryAfterSlotCleared, RESCUE),
    (ReclaimedKeepsCancel, ROW_LOST),
]

#: The scopes ``proofs/run.py`` explores, each exhaustively (see proofs/README.md).
#: Every one has V = 2, H = 0.5, D = 1, up to two wedged calls, and handlers that exit at
#: any instant; they differ in what else may happen.
SCOPES: list[Scope] = [
    Scope(
        "3 batches x 1 job, 2 renewals, every verdict",
        jobs_per_batch=(1, 1, 1),
        renewals=2,
        notices=0,
        shutdowns=0,
        beats=0,
    ),
    Scope(
        "2 batches x 1 job, 4 renewals, renewed or left out",
        jobs_per_batch=(1, 1),
        renewals=4,
        notices=0,
        shutdowns=0,
        beats=0,
        deviations=(None,),
    ),
    Scope(
        "1 batch x 1 job, 3 renewals, every verdict, shutdown, claim hooks, short claim leases",
        jobs_per_batch=(1,),
        renewals=3,
        notices=0,
        beats=0,
        hooks=(0.0, 0.5),
        short_leases=(0.125,),
    ),
    Scope(
        "1 batch x 2 jobs, 2 renewals, every verdict, a cancel notice",
        jobs_per_batch=(2,),
        renewals=2,
        shutdowns=0,
        beats=0,
    ),
    Scope(
        "2 batches x 1 job, 2 renewals, every verdict, short claim leases",
        jobs_per_batch=(1, 1),
        renewals=2,
        notices=0,
        shutdowns=0,
        beats=0,
        short_leases=(0.125,),
    ),
    Scope(
        "2 batches x 1 job, 2 renewals, every verdict, outcomes written later",
        jobs_per_batch=(1, 1),
        renewals=2,
        notices=0,
        shutdowns=0,
        beats=0,
        writes=True,
    ),
    Scope(
        "1 batch x 1 job, 4 renewals, every verdict, a lone beat",
        jobs_per_batch=(1,),
        renewals=4,
        notices=0,
        shutdowns=0,
    ),
]

#: Where the negative twins are searched: each must come back with a counterexample.
TWIN_SCOPE = Scope(
    "2 batches x 1 job, 3 renewals, every verdict, claim hooks, short claim leases",
    jobs_per_batch=(1, 1),
    renewals=3,
    notices=0,
    shutdowns=0,
    beats=0,
    hooks=(0.5,),
    short_leases=(0.125,),
)


def twin_found(result: Result, invariant: str) -> bool:
    """The twin's search ended on a counterexample to the invariant it breaks."""
    return result.violation is not None and result.violation.startswith(f"{invariant}:")
