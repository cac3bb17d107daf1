"""A stateful property test of the guard's sans-IO core (``GuardCore``), float clock.

The machine plays the trio runtime (``trioqueue._runtime.guard``) and the database against one
``GuardCore``. Its rules register batches (some already expired), let time pass, wake the
guard task (``poll``, then send the renewal the core offers), let the current renewal come
back (random verdicts per job, missing ones included; an error; its timeout), leave it
hanging (``stuck``: it returns only after it could have been abandoned; ``hard``: never),
let an abandoned call exit late, answer superseded or unknown tokens, settle jobs, report
progress and checkpoints, deliver cancel notices (also while a renewal is out) and begin a
shutdown. As in
the runtime, the guard usually runs right after a registration, an answer or a clock step.

A small model tracks what the database granted, which cancel notices are outstanding, and
the deadlines the runtime's cancel scopes hold (moved only as ``Effects.moved`` says).
Invariants and checks are named after docs/protocol.rst (I2, I4, I5, I6, I7, I8, I10, I11, I12,
I13, I18).

A batch's stop (why its scope was stopped: frozen, decides the outcome) and its lease (lost
once the fence passes) are separate: a stopped batch is still renewed while any of its jobs
is pending, that is until the runtime says its handler exited (``job_done``), since a
handler unwinding past its stop still owns its job (docs/protocol.rst §4).

The model of the database is deliberately conservative: a row renewed by a renewal is taken
to be leased until ``sent_at + V`` (the database read its clock *after* the statement was
sent, so the real lease is at least that), and only answers the core accepted as current
count. The fence must never outlive that, except by the 0.25 s an in-flight renewal may
take to settle.
"""

from __future__ import annotations

import math
from collections.abc import Container
from dataclasses import dataclass, fields, replace
from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from trioqueue._core.checkpoint import CheckpointSlot
from trioqueue._core.guard_rules import (
    BatchLease,
    Effects,
    GuardCore,
    JobLease,
    Renewal,
)
from trioqueue._core.progress import valid_progress
from trioqueue._core.rules import StopReason
from trioqueue._core.timing import GRACE, MIN_RETRY, Timing, retry_delay
from trioqueue._core.wire import RenewItem, Verdict

EPS = 1e-6  # float slack for sums of times up to ~1e6
UNKNOWN = 10**9  # a token or job id the core never issued

TIMINGS = [
    Timing(visibility_timeout=30.0, heartbeat_interval=10.0),
    Timing(visibility_timeout=30.0, heartbeat_interval=10.0, max_job_duration=45.0),
    Timing(visibility_timeout=6.0, heartbeat_interval=2.0, max_job_duration=20.0),
    Timing(visibility_timeout=1.0, heartbeat_interval=0.3),
    Timing(visibility_timeout=2.0, heartbeat_interval=1.5, max_job_duration=3.0),
]

#: How a renewal's driver call behaves.
CALL_MODES = ["normal"] * 8 + ["stuck", "hard"]

#: How a renewal's driver call comes back.
HOW = ["answer", "answer", "error", "timeout"]

#: Per-job answers; None leaves the job out of the answer (counts as UNCHANGED).
VERDICTS: list[Verdict | None] = [
    Verdict.EXTENDED,
    Verdict.EXTENDED,
    Verdict.CANCEL_REQUESTED,
    Verdict.RECLAIMED,
    Verdict.GONE,
    Verdict.UNCHANGED,
    None,
]

#: How a claimed row's lease relates to the claim (mostly the claim's own lease).
ROW_KINDS = ["claimed"] * 6 + ["short", "nearly expired", "expired"]

#: Anything a handler might pass to ``ctx.report_progress``.
PROGRESS_VALUES = st.one_of(
    st.floats(0.0, 1.0),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-2, 2),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
)


def expected_stop(fence: float, duration: float, shutdown: float, now: float) -> StopReason | None:
    """The reason a live batch must freeze with at ``now``: the first deadline to pass, and
    lease > duration > shutdown when they pass together."""
    deadlines = [
        (fence, StopReason.LEASE_EXPIRED),
        (duration, StopReason.DURATION),
        (shutdown, StopReason.SHUTDOWN),
    ]
    passed = [(when, order, why) for order, (when, why) in enumerate(deadlines) if when <= now]
    return min(passed)[2] if passed else None


LOSES_JOB = (StopReason.RECLAIMED, StopReason.GONE)
#: The model's own reading of docs/protocol.rst §2, independent of the core's table.
RENEWING = (Verdict.EXTENDED, Verdict.CANCEL_REQUESTED)


def runs_with_its_row(job: JobLease) -> bool:
    """Its handler has not exited, and its row was not reclaimed or found gone."""
    return job.pending and job.stop not in LOSES_JOB


def renewable(batch: BatchLease) -> bool:
    return not batch.lost and any(runs_with_its_row(job) for job in batch.jobs.values())


def freeze(value: object) -> object:
    """A copy of the core's state for equality checks: dicts and the core's mutable
    dataclasses are copied field by field; everything else there is immutable."""
    if isinstance(value, dict):
        return {key: freeze(item) for key, item in value.items()}
    if isinstance(value, (list, set)):
        return (type(value), *map(freeze, value))
    if isinstance(value, (BatchLease, JobLease, CheckpointSlot)):
        return (type(value), *(freeze(getattr(value, f.name)) for f in fields(value)))
    return value


def copy_batch(batch: BatchLease) -> BatchLease:
    return replace(batch, jobs={j: replace(job) for j, job in batch.jobs.items()})


@dataclass
class ModelJob:
    batch_id: int
    claim_seq: int
    granted: float  # the row's lease for our attempt, as the database granted it (local time)
    done: bool = False  # the runtime called job_done
    ended: bool = False  # the runtime called work_ended: outcome decided, maybe unwritten
    progress: float | None = None  # latest valid value reported
    stopped: int = 0  # appearances in Effects.stops
    cancelled: int = 0  # appearances in Effects.cancels
    cancel_flag: bool = False  # the row's cancel flag is set (renewals report it from now on)
    checkpoint: str | None = None  # the latest ctx.checkpoint (JSON text)
    # What the row surely holds of this attempt's checkpoints (None: none, or not known).
    confirmed: str | None = None
    # The core surely knows the row holds the latest: a renewal must not send it again.
    fresh: bool = False


@dataclass
class ModelBatch:
    job_ids: list[int]
    registered_at: float
    scope: float  # the runtime's cancel-scope deadline, updated only as Effects say
    lease: float  # last seen lease deadline
    stop: StopReason | None = None  # first non-None stop seen
    lost: bool = False  # the core said its lease was lost
    notice: bool = False  # a cancel notice came in that no renewal sent since carried
    beaten: bool = False  # its first beat went out, or was waived (all its work had ended)


@dataclass
class Call:
    """One renewal statement and the driver call running it.

    ``stuck``: the driver call ignores its timeout and comes back only after the guard could
    have abandoned it. ``hard``: it never comes back at all (a wedged backend).
    """

    renewal: Renewal
    stuck: bool
    hard: bool
    state: str = "current"  # "current", "abandoned" or "settled"

    def may_return(self, now: float) -> bool:
        return not self.hard and (not self.stuck or now >= self.renewal.abandon_at)


class GuardMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.core: GuardCore | None = None
        self.timing = TIMINGS[0]
        self.now = 0.0
        self.skew = 0.0  # database wall clock minus local clock
        self.jobs: dict[int, ModelJob] = {}
        self.batches: dict[int, ModelBatch] = {}
        self.calls: dict[int, Call] = {}
        self.abandoned: int | None = None  # the token the model believes is abandoned
        self.beat_out: str | None = None  # a lone beat's call: "returns" or "hard" (wedged)
        self.last_duration = 0.0  # how long the last answered renewal took
        self.next_batch_id = 1
        self.next_job_id = 1
        self.may_shut_down = False

    # -- helpers ------------------------------------------------------------------------

    @property
    def g(self) -> GuardCore:
        assert self.core is not None
        return self.core

    def current_call(self) -> Call | None:
        if self.core is None or self.core.current is None:
            return None
        return self.calls[self.core.current.token]

    def snapshot(self) -> dict[str, Any]:
        """Everything the core holds, copied (faster than ``copy.deepcopy``)."""
        state = freeze(vars(self.g))
        assert isinstance(state, dict)
        return state

    def batch_copies(self, batch_ids: Container[int]) -> dict[int, tuple[float, BatchLease]]:
        """Each registered batch's fence (as of now) and a copy of its state."""
        core = self.g
        return {
            b: (core.fence_time(core.batch(b)), copy_batch(core.batch(b)))
            for b in self.batches
            if b in batch_ids
        }

    def draw_verdicts(self, data: st.DataObject, renewal: Renewal) -> dict[int, Verdict]:
        """Either every row renewed (a row whose cancel flag is set says so, every time, as
        the database would), or anything at all per job."""
        if data.draw(st.booleans(), label="all renewed"):
            return {
                item.job_id: Verdict.CANCEL_REQUESTED
                if self.jobs[item.job_id].cancel_flag
                else Verdict.EXTENDED
                for item in renewal.items
            }
        verdicts: dict[int, Verdict] = {}
        for item in renewal.items:
            verdict = data.draw(st.sampled_from(VERDICTS), label=f"verdict {item.job_id}")
            if verdict is not None:
                verdicts[item.job_id] = verdict
            if verdict is Verdict.CANCEL_REQUESTED:
                self.jobs[item.job_id].cancel_flag = True
        if data.draw(st.booleans(), label="stray verdict"):
            verdicts[UNKNOWN] = Verdict.EXTENDED  # a job the renewal did not carry
        return verdicts

    def absorb(self, effects: Effects) -> None:
        """Carry out Effects as the runtime does, checking I5, I8 and I12 on the way."""
        core = self.g
        for batch_id, job_id, reason in effects.stops:
            job = self.jobs[job_id]
            assert job.batch_id == batch_id
            job.stopped += 1
            assert job.stopped == 1, f"I8: job {job_id} stopped twice"
            assert reason in (StopReason.RECLAIMED, StopReason.GONE)
            assert core.batch(batch_id).stop is None, "I8: job stop recorded on a stopped batch"
        for batch_id, job_id in effects.cancels:
            job = self.jobs[job_id]
            assert job.batch_id == batch_id
            job.cancelled += 1
            assert job.cancelled == 1, f"I12: job {job_id} got two cancel directives"
        for batch_id in effects.moved:
            if batch_id in self.batches:
                self.batches[batch_id].scope = core.scope_deadline(batch_id)
        if effects.abandoned is not None:
            assert self.abandoned is None, "I5: abandoned a renewal while another is abandoned"
            call = self.calls[effects.abandoned]
            self.checkpoints_unknown(call.renewal)
            assert call.state == "current"
            assert core.abandoned is call.renewal
            assert core.current is None
            assert self.now >= call.renewal.abandon_at, "I5: abandoned before give-up + grace"
            call.state = "abandoned"
            self.abandoned = effects.abandoned

    def check_retry_frozen(
        self, before: dict[int, tuple[float, BatchLease]], *, in_flight_fence: bool
    ) -> None:
        """After a failed or abandoned renewal: no lease or job changes; a batch past a
        deadline may freeze (now or lazily later) for that reason; any other is retried."""
        core, now = self.g, self.now
        h = self.timing.heartbeat_interval
        for b, (fence, old) in before.items():
            batch = core.batch(b)
            if old.lost:
                assert batch == old
                continue
            assert batch.lease_deadline == old.lease_deadline
            assert batch.jobs == old.jobs
            # Judged with the renewal in flight (a failure settles it), then, once it no
            # longer counts as in flight, with the lease alone.
            in_flight = expected_stop(fence, old.duration_deadline, core.shutdown_at, now)
            lease = expected_stop(old.lease_deadline, old.duration_deadline, core.shutdown_at, now)
            first = in_flight if in_flight_fence and in_flight is not None else lease
            assert batch.stop is (old.stop or first), (batch.stop, old.stop, first)
            assert batch.lost == (old.lease_deadline <= now)
            if not batch.lost:  # stopped or not: its handler may still run (§4)
                expected = now + retry_delay(h, old.lease_deadline - now)
                if self.batches[b].notice:  # I12: a notice that came in meanwhile is kept
                    expected = now
                assert abs(batch.next_due - expected) <= EPS

    # -- setup --------------------------------------------------------------------------

    @initialize(
        timing=st.sampled_from(TIMINGS),
        start=st.sampled_from([0.0, 1000.5, 123456.0]),
        skew=st.sampled_from([0.0, -3.5, 1e6]),
        may_shut_down=st.booleans(),
        first_batches=st.integers(1, 3),
        data=st.data(),
    )
    def setup(
        self,
        timing: Timing,
        start: float,
        skew: float,
        may_shut_down: bool,
        first_batches: int,
        data: st.DataObject,
    ) -> None:
        self.core = GuardCore(timing)
        self.timing = timing
        self.now = start
        self.skew = skew
        self.may_shut_down = may_shut_down
        # A few claimed batches to start with, whatever rules a run leaves enabled.
        for _ in range(first_batches):
            self.claim(data.draw(st.integers(1, 4)), data.draw(st.floats(0.0, 0.5)), data)

    # -- registration and jobs ----------------------------------------------------------

    # At most six batches at once; and a pool that is shutting down claims nothing.
    @precondition(
        lambda self: (
            self.core is not None and len(self.batches) < 6 and self.core.shutdown_at == math.inf
        )
    )
    @rule(n=st.integers(1, 4), lag=st.floats(0.0, 0.5), data=st.data())
    def register(self, n: int, lag: float, data: st.DataObject) -> None:
        """Register a claimed batch (I7: refused when a row already expired; I10)."""
        self.claim(n, lag, data)
        self.guard_may_run(data)

    def claim(self, n: int, lag: float, data: st.DataObject) -> None:
        core, now, v = self.g, self.now, self.timing.visibility_timeout
        claim_sent = now - lag
        wall_now = now + self.skew
        db_delay = data.draw(st.floats(0.0, 1.0), label="claim ran after") * lag
        rows = []
        for _ in range(n):
            # Mostly the claim's own lease (database clock at execution + V); sometimes a
            # shorter one, one about to expire, or one that already expired.
            kind = data.draw(st.sampled_from(ROW_KINDS), label="row lease")
            if kind == "claimed":
                rows.append(claim_sent + db_delay + self.skew + v)
            elif kind == "short":
                rows.append(wall_now + data.draw(st.floats(0.01, 1.0)) * v)
            elif kind == "nearly expired":  # the first renewal may outlive it by < 0.25 s
                rows.append(wall_now + data.draw(st.floats(0.001, 2 * MIN_RETRY)))
            else:
                rows.append(wall_now - data.draw(st.floats(0.0, 1.0)))
        local_rows = [now + (row - wall_now) for row in rows]
        fence = min([claim_sent + v, *local_rows])
        batch_id = self.next_batch_id
        self.next_batch_id += 1
        job_ids = list(range(self.next_job_id, self.next_job_id + n))
        self.next_job_id += n
        seqs = [data.draw(st.integers(1, 5), label="claim_seq") for _ in job_ids]
        accepted = core.register(
            batch_id,
            list(zip(job_ids, seqs, strict=True)),
            claim_sent=claim_sent,
            now=now,
            wall_now=wall_now,
            row_deadlines=rows,
        )
        assert accepted == (fence > now), "I7: expired batches are refused, live ones accepted"
        if not accepted:
            assert batch_id not in core.batch_ids()
            return
        assert abs(core.batch(batch_id).lease_deadline - fence) <= EPS
        for job_id, seq, granted in zip(job_ids, seqs, local_rows, strict=True):
            self.jobs[job_id] = ModelJob(batch_id, seq, granted)
        self.batches[batch_id] = ModelBatch(
            job_ids=job_ids,
            registered_at=now,
            scope=core.scope_deadline(batch_id),
            lease=core.batch(batch_id).lease_deadline,
        )
        if core.current is None:
            assert core.next_wake(now) <= now, "I10: the first beat is immediate"

    def first_beat_waivable(self, batch_id: int) -> bool:
        """Its first beat has not gone out, no cancel notice waits, and every job of it
        that still runs with its row has ended."""
        model = self.batches[batch_id]
        running = [j for j in self.g.batch(batch_id).jobs.values() if runs_with_its_row(j)]
        return (
            not model.beaten
            and not model.notice
            and all(self.jobs[job.job_id].ended for job in running)
        )

    def finish_batch(self, batch_id: int) -> None:
        self.g.unregister(batch_id)
        del self.batches[batch_id]
        assert batch_id not in self.g.batch_ids()

    @precondition(
        lambda self: any(
            not job.done and job.batch_id in self.batches for job in self.jobs.values()
        )
    )
    @rule(data=st.data())
    def job_done(self, data: st.DataObject) -> None:
        """A job's outcome is settled (any reason): it is renewed no more. After the last
        job of a batch, the batch may leave the guard."""
        open_jobs = sorted(
            j for j, job in self.jobs.items() if not job.done and job.batch_id in self.batches
        )
        job_id = data.draw(st.sampled_from(open_jobs))
        job = self.jobs[job_id]
        self.g.job_done(job.batch_id, job_id)
        job.done = True
        assert not self.g.job(job.batch_id, job_id).pending
        batch_jobs = self.batches[job.batch_id].job_ids
        if all(self.jobs[j].done for j in batch_jobs) and data.draw(
            st.booleans(), label="unregister"
        ):
            self.finish_batch(job.batch_id)

    @precondition(
        lambda self: any(
            not job.done and not job.ended and job.batch_id in self.batches
            for job in self.jobs.values()
        )
    )
    @rule(data=st.data())
    def work_ended(self, data: st.DataObject) -> None:
        """A job's claim hook and handler exited and its outcome is decided; its write is
        still to come (``job_done`` later). It is still renewed, but owed no first beat."""
        open_jobs = sorted(
            j
            for j, job in self.jobs.items()
            if not job.done and not job.ended and job.batch_id in self.batches
        )
        job_id = data.draw(st.sampled_from(open_jobs))
        job = self.jobs[job_id]
        self.g.work_ended(job.batch_id, job_id)
        job.ended = True
        assert self.g.job(job.batch_id, job_id).pending, "still renewed until written"
        self.guard_may_run(data)

    @precondition(
        lambda self: (
            self.core is not None and any(self.core.batch(b).stop is not None for b in self.batches)
        )
    )
    @rule(data=st.data())
    def stopped_batch_winds_up(self, data: st.DataObject) -> None:
        """The runtime settles every job of a stopped batch, then unregisters it."""
        stopped = sorted(b for b in self.batches if self.g.batch(b).stop is not None)
        batch_id = data.draw(st.sampled_from(stopped))
        for job_id in self.batches[batch_id].job_ids:
            self.g.job_done(batch_id, job_id)
            self.jobs[job_id].done = True
        self.finish_batch(batch_id)

    @precondition(lambda self: any(job.batch_id in self.batches for job in self.jobs.values()))
    @rule(data=st.data(), value=PROGRESS_VALUES)
    def report_progress(self, data: st.DataObject, value: object) -> None:
        """I11: what ``ctx.report_progress`` does; only finite values in [0, 1] are kept."""
        live = sorted(j for j, job in self.jobs.items() if job.batch_id in self.batches)
        job_id = data.draw(st.sampled_from(live))
        job = self.jobs[job_id]
        lease = self.g.job(job.batch_id, job_id)
        progress = valid_progress(value)
        if progress is not None:
            lease.progress = progress
            job.progress = progress
        assert lease.progress == job.progress

    @precondition(lambda self: any(job.batch_id in self.batches for job in self.jobs.values()))
    @rule(data=st.data(), text=st.sampled_from(["1", "2", '"x"']))
    def checkpoint(self, data: st.DataObject, text: str) -> None:
        """I18: what ``ctx.checkpoint`` does (the value already encoded): the latest wins."""
        live = sorted(j for j, job in self.jobs.items() if job.batch_id in self.batches)
        job_id = data.draw(st.sampled_from(live))
        job = self.jobs[job_id]
        lease = self.g.job(job.batch_id, job_id)
        if lease.checkpoint is None:
            lease.checkpoint = CheckpointSlot(text)
        else:
            lease.checkpoint.latest = text
        job.fresh = job.fresh and text == job.checkpoint
        job.checkpoint = text

    def checkpoints_unknown(self, renewal: Renewal) -> None:
        """A renewal failed or was abandoned: a checkpoint it carried may or may not be
        stored."""
        for item in renewal.items:
            if item.checkpoint is not None:
                job = self.jobs[item.job_id]
                job.confirmed, job.fresh = None, False

    # -- time ---------------------------------------------------------------------------

    @precondition(lambda self: self.core is not None)
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        """Let time pass: a tiny step, up to a heartbeat, up to 1.5 leases, or to (just
        around) a time the core cares about. (Hypothesis tries one-argument rules first and
        by name: this is the rule its simplest runs repeat.)"""
        kind = data.draw(st.sampled_from(["heartbeat", "little", "lease", "edge"]))
        h, v = self.timing.heartbeat_interval, self.timing.visibility_timeout
        if kind == "little":
            self.now += data.draw(
                st.one_of(st.sampled_from([0.0, 1e-9, 0.01, MIN_RETRY]), st.floats(0.0, 0.3))
            )
        elif kind == "heartbeat":
            self.now += data.draw(st.floats(0.0, 1.0)) * h
        elif kind == "lease":
            self.now += data.draw(st.floats(0.0, 1.5)) * v
        else:
            core = self.g
            edges = [core.next_wake(self.now)]
            if core.current is not None:
                edges += [core.current.give_up_at, core.current.abandon_at]
            for b in self.batches:
                batch = core.batch(b)
                edges += [core.fence_time(batch), batch.duration_deadline, batch.next_due]
            jitter = data.draw(st.sampled_from([0.0, -1e-6, 1e-6]))
            edges = sorted(e + jitter for e in edges if math.isfinite(e) and e + jitter > self.now)
            if edges:
                self.now = data.draw(st.sampled_from(edges))
        self.guard_may_run(data)

    # -- lone beats -----------------------------------------------------------------------

    @precondition(lambda self: self.core is not None)
    @rule(hard=st.booleans())
    def lone_beat_goes(self, hard: bool) -> None:
        """The pool's beat goes alone only while no statement holds a connection; while it is
        out it holds one (``hard``: its call never exits, a wedged backend)."""
        held = self.g.connections_held()
        went = self.g.begin_beat()
        assert went == (held == 0)
        if went:
            self.beat_out = "hard" if hard else "returns"

    @precondition(lambda self: self.beat_out == "returns")
    @rule(data=st.data(), later=st.floats(0.0, 3.0))
    def lone_beat_exits(self, data: st.DataObject, later: float) -> None:
        """The lone beat's call exits, maybe long after it went: the current renewal, if it
        is past its abandon time by now, may be abandoned in the beat's place."""
        self.now += later
        self.beat_out = None
        self.poll(beat_exits=True)
        self.guard_may_run(data)

    # -- the guard task and the renewal slot --------------------------------------------

    @precondition(lambda self: self.core is not None)
    @rule(data=st.data())
    def guard_wakes(self, data: st.DataObject) -> None:
        """What the guard task does each time it wakes (optionally after sleeping until
        ``next_wake``): ``poll``, then send the renewal the core offers, if any."""
        if data.draw(st.booleans(), label="sleep"):
            self.sleep_until_wake()
        self.guard_runs(data)

    def sleep_until_wake(self) -> None:
        wake = self.g.next_wake(self.now)
        if math.isfinite(wake) and wake > self.now:
            self.now = wake

    def guard_runs(self, data: st.DataObject) -> None:
        self.poll()
        if self.g.current is None:
            self.start_renewal(data.draw(st.sampled_from(CALL_MODES), label="call mode"))
            call = self.current_call()
            if (
                call is not None
                and not (call.stuck or call.hard)
                and data.draw(st.sampled_from([True, True, False]), label="answers quickly")
            ):
                self.renewal_returns(data, data.draw(st.sampled_from(HOW)), quick=True)

    def guard_may_run(self, data: st.DataObject) -> None:
        """The runtime pokes the guard after registrations and answers, and it wakes by
        itself as time passes: mostly it runs before anything else happens, maybe after
        sleeping until its next wake-up."""
        how = data.draw(st.sampled_from(["runs", "runs", "sleeps, runs", "waits"]), label="guard")
        if how == "sleeps, runs":
            self.sleep_until_wake()
        if how != "waits":
            self.guard_runs(data)

    def poll(self, *, beat_exits: bool = False) -> None:
        """I5: the current renewal is abandoned exactly when past give-up + grace, and only
        while no other renewal is abandoned and no lone beat is out. ``beat_exits``: the
        lone beat's call exits (``end_beat``), which frees its connection, then polls."""
        core, now = self.g, self.now
        current, abandoned = core.current, core.abandoned
        beating = core.beating and not beat_exits
        due = (
            current is not None and abandoned is None and not beating and now >= current.abandon_at
        )
        before_state = self.snapshot()
        if beat_exits:
            before_state["beating"] = False
        before = self.batch_copies(current.batch_ids if current is not None else ())
        effects = core.end_beat(now) if beat_exits else core.poll(now)
        if not due:
            assert effects == Effects()
            assert self.snapshot() == before_state
            return
        assert current is not None
        assert effects.abandoned == current.token
        assert effects.moved == set(current.batch_ids)
        assert not effects.stops
        assert not effects.cancels
        self.check_retry_frozen(before, in_flight_fence=False)
        self.absorb(effects)

    def start_renewal(self, mode: str) -> None:
        """I10: a free slot and a due batch give one statement carrying every due batch."""
        core, now = self.g, self.now
        before = {b: (core.batch(b).stop, core.batch(b).lost) for b in self.batches}
        before_due = {b: core.batch(b).next_due for b in self.batches}
        renewal = core.next_renewal(now)
        for b, (stop, lost) in before.items():
            batch = core.batch(b)
            if stop is None and batch.stop is not None:
                # Frozen (lazily, maybe) only if a deadline passed: the first one.
                assert batch.stop is expected_stop(
                    batch.lease_deadline, batch.duration_deadline, core.shutdown_at, now
                )
            if not lost and batch.lost:
                assert batch.lease_deadline <= now, "lost before its fence"
        # Batches due within the last statement's duration (at most H / 2) ride along with
        # those due now: they would otherwise wait for the slot and go alone. Stopped
        # batches too, while a handler of theirs runs (§4).
        lookahead = min(self.last_duration, self.timing.heartbeat_interval / 2)
        live = {b for b in self.batches if renewable(core.batch(b))}
        due = {b for b in live if before_due[b] <= now}
        due_soon = {b for b in live if before_due[b] <= now + lookahead}
        # A first beat is owed to running work only: a batch whose every running job has
        # ended (and no cancel notice waits) may be passed over, due on a later beat.
        # (Batches due soon are looked at only when some batch is due now.)
        waivable = {b for b in due_soon if self.first_beat_waivable(b)}
        considered = due_soon if due else set()
        waived = considered - (renewal.batch_ids if renewal is not None else set())
        assert waived <= waivable, "I10: a batch with running work was left without its beat"
        for b in waived:
            event("a first beat waived")
            batch = core.batch(b)
            assert now < batch.next_due <= now + self.timing.heartbeat_interval + EPS
            self.batches[b].beaten = True
        if renewal is None:
            assert not due - waived, "I10: a due batch was left without a renewal"
            assert core.next_wake(now) > now, "nothing to send, yet the guard would wake at once"
            return
        assert core.current is renewal
        assert renewal.token not in self.calls
        assert renewal.token > max(self.calls, default=0)
        assert renewal.sent_at == now
        assert due - waived, "a renewal is sent only when some batch is due"
        carried = [core.batch(b) for b in renewal.batch_ids]
        for batch in carried:
            assert not batch.lost
            assert batch.next_due <= now + lookahead
            # A batch past its fence has lost its lease: never renewed (stopped or not).
            assert batch.lease_deadline > now
        job_ids = [item.job_id for item in renewal.items]
        assert len(job_ids) == len(set(job_ids)), "I10: a job carried twice"
        running = {j.job_id for b in carried for j in b.jobs.values() if runs_with_its_row(j)}
        assert set(job_ids) == running
        for item in renewal.items:
            job = self.jobs[item.job_id]
            assert not job.done
            assert job.stopped == 0
            assert item.claim_seq == job.claim_seq
            assert item.progress == job.progress, "I11: the latest valid progress goes out"
            assert item.checkpoint in (None, job.checkpoint), "I18: only the latest goes out"
            if item.checkpoint is None:
                assert job.checkpoint in (None, job.confirmed), "I18: the latest is not stored"
            else:
                assert not job.fresh, "I18: a checkpoint the row holds is sent again"
        v = self.timing.visibility_timeout
        timeout = renewal.give_up_at - renewal.sent_at
        assert MIN_RETRY - EPS <= timeout <= max(MIN_RETRY, v) + EPS
        earliest = min(batch.lease_deadline for batch in carried)
        assert renewal.give_up_at <= max(now + MIN_RETRY, earliest) + EPS
        for b in renewal.batch_ids:
            self.batches[b].notice = False  # this renewal fetches the cancel directive
            self.batches[b].beaten = True
        self.calls[renewal.token] = Call(renewal, stuck=mode == "stuck", hard=mode == "hard")
        self.absorb(Effects(moved=set(renewal.batch_ids)))  # what the runtime does on send

    @precondition(
        lambda self: (call := self.current_call()) is not None and call.may_return(self.now)
    )
    @rule(data=st.data(), how=st.sampled_from(HOW))
    def current_renewal_returns(self, data: st.DataObject, how: str) -> None:
        """The current renewal's driver call comes back: an answer (after a drawn latency,
        maybe past its give-up time), an error, or its timeout (at give-up). A cancel notice
        for a job it carries may arrive while it is out. Then the guard is poked."""
        self.renewal_returns(data, how, quick=False)
        self.guard_may_run(data)

    def renewal_returns(self, data: st.DataObject, how: str, *, quick: bool) -> None:
        call = self.current_call()
        assert call is not None
        renewal = call.renewal
        if bool(renewal.items) and data.draw(st.booleans(), label="a cancel notice races it"):
            self.notify(data.draw(st.sampled_from([item.job_id for item in renewal.items])))
        if how == "timeout":
            self.now = max(self.now, renewal.give_up_at)
        else:
            slowest = 0.1 if quick else 1.2  # of the statement's timeout
            latency = data.draw(st.floats(0.0, slowest), label="latency") * (
                renewal.give_up_at - renewal.sent_at
            )
            self.now = max(self.now, renewal.sent_at + latency)
        if how == "answer":
            self.answer_current(call, self.draw_verdicts(data, renewal))
        else:
            self.fail_current(call)

    def answer_current(self, call: Call, verdicts: dict[int, Verdict]) -> None:
        core, now, renewal = self.g, self.now, call.renewal
        before = self.batch_copies(renewal.batch_ids)
        effects = core.answered(renewal.token, now, verdicts)
        self.last_duration = now - renewal.sent_at
        call.state = "settled"
        assert core.current is None
        assert effects.moved == set(renewal.batch_ids)
        assert effects.abandoned is None
        # The database renewed these rows no earlier than the statement was sent.
        v, h = self.timing.visibility_timeout, self.timing.heartbeat_interval
        for item in renewal.items:
            verdict = verdicts.get(item.job_id)
            if verdict is not None and verdict in RENEWING:
                job = self.jobs[item.job_id]
                job.granted = max(job.granted, renewal.sent_at + v)
            self.checkpoint_answered(item, verdict)
        stops: list[tuple[int, int, StopReason]] = []
        cancels: list[tuple[int, int]] = []
        for b, (fence, old) in before.items():
            batch = core.batch(b)
            if old.lost:
                assert batch == old, "I8: an answer revived or changed a lost batch"
                continue
            # Expiry is judged while the renewal still counts as in flight (I2): an answer
            # before give-up is in time; one after the fence changes nothing for the batch,
            # which lost its lease. Another deadline passing only stops it: then the answer
            # still counts, since a handler unwinding past its stop keeps its lease (§4).
            stop = old.stop or expected_stop(fence, old.duration_deadline, core.shutdown_at, now)
            assert batch.stop is stop, "I8: the first deadline to pass is the reason"
            if fence <= now:
                assert batch.lost
                assert batch.lease_deadline == old.lease_deadline
                assert batch.jobs == old.jobs
                continue
            assert not batch.lost
            renewed_all, gone_first = True, False
            for job_id, old_job in old.jobs.items():
                lease = batch.jobs[job_id]
                if not runs_with_its_row(old_job):
                    assert lease == old_job
                    continue
                verdict = verdicts.get(job_id, Verdict.UNCHANGED)
                if verdict is Verdict.GONE and not old_job.gone_seen:
                    assert lease.pending
                    assert lease.gone_seen, "GONE needs a second sighting"
                    renewed_all, gone_first = False, True
                elif verdict in (Verdict.GONE, Verdict.RECLAIMED):
                    why = StopReason.GONE if verdict is Verdict.GONE else StopReason.RECLAIMED
                    if stop is None:  # a stopped batch's handlers are already cancelled (I8)
                        stops.append((b, job_id, why))
                    assert lease.pending, "pending until its handler exits"
                    assert lease.stop is why
                    assert not runs_with_its_row(lease)
                else:
                    assert runs_with_its_row(lease)
                    assert not lease.gone_seen
                    cancel = verdict is Verdict.CANCEL_REQUESTED
                    if cancel and old_job.stop is None and stop is None:
                        cancels.append((b, job_id))
                    if cancel and stop is None:
                        assert lease.stop is StopReason.CANCELLED
                    else:  # on a stopped batch the first stop stands
                        assert lease.stop is old_job.stop
                    renewed_all = renewed_all and verdict in RENEWING
            # I12: a cancel notice that came in while this renewal was out is not lost.
            notice = self.batches[b].notice
            if renewed_all:
                assert batch.lease_deadline == max(old.lease_deadline, renewal.sent_at + v)
                if notice:
                    assert batch.next_due <= now
                else:  # the next beat: later, and at most H after this renewal was sent
                    assert now < batch.next_due <= renewal.sent_at + h + EPS or (
                        batch.next_due == renewal.sent_at + h <= now
                    )
            else:
                assert batch.lease_deadline == old.lease_deadline, "only EXTENDED renews"
                expected = now + retry_delay(h, old.lease_deadline - now)
                if gone_first:  # the confirming renewal follows within 0.25 s
                    expected = min(expected, now + MIN_RETRY)
                if notice:
                    expected = now
                assert abs(batch.next_due - expected) <= EPS
        assert sorted(effects.stops, key=lambda s: s[:2]) == sorted(stops, key=lambda s: s[:2])
        assert sorted(effects.cancels) == sorted(cancels)
        self.absorb(effects)

    def checkpoint_answered(self, item: RenewItem, verdict: Verdict | None) -> None:
        """I18: a renewing verdict stored what the item carried; any other stored nothing.
        The core surely knows it (``fresh``) while the job is still renewed."""
        if item.checkpoint is None:
            return
        job = self.jobs[item.job_id]
        if verdict not in RENEWING:
            job.fresh = False
            return
        job.confirmed = item.checkpoint
        if job.batch_id not in self.batches:
            job.fresh = False
            return
        batch = self.g.batch(job.batch_id)
        lease = batch.jobs[item.job_id]
        job.fresh = not batch.lost and lease.renewed and item.checkpoint == job.checkpoint

    def fail_current(self, call: Call) -> None:
        core, renewal = self.g, call.renewal
        self.checkpoints_unknown(renewal)
        before = self.batch_copies(renewal.batch_ids)
        effects = core.failed(renewal.token, self.now)
        call.state = "settled"
        assert core.current is None
        assert effects == Effects(moved=set(renewal.batch_ids))
        self.check_retry_frozen(before, in_flight_fence=True)
        self.absorb(effects)

    @precondition(
        lambda self: (
            self.core is not None
            and self.core.abandoned is not None
            and self.calls[self.core.abandoned.token].may_return(self.now)
        )
    )
    @rule(data=st.data())
    def abandoned_call_exits_late(self, data: st.DataObject) -> None:
        """I6: the abandoned call's late answer changes no lease, deadline, verdict or slot.

        Its connection comes back, so the current renewal, if already past its own abandon
        time, is abandoned in its place (documented): then only batch and job state is
        compared, and the batches that renewal carried may be rescheduled or frozen by time.
        Then the guard is poked.
        """
        self.late_exit(data)
        self.guard_may_run(data)

    def late_exit(self, data: st.DataObject) -> None:
        core, now = self.g, self.now
        abandoned = core.abandoned
        assert abandoned is not None
        call = self.calls[abandoned.token]
        current = core.current
        if current is not None and data.draw(st.booleans(), label="exits late"):
            # ... after the current renewal is stuck past its own abandon time too.
            self.now = max(self.now, current.abandon_at + data.draw(st.floats(0.0, 0.5)))
            now = self.now
        before_state = self.snapshot()
        before = self.batch_copies(set(self.batches))
        if data.draw(st.booleans(), label="answers"):
            effects = core.answered(abandoned.token, now, self.draw_verdicts(data, abandoned))
        else:
            effects = core.failed(abandoned.token, now)
        call.state = "settled"
        self.abandoned = None
        if current is None or now < current.abandon_at:
            assert effects == Effects()
            after_state = self.snapshot()
            assert after_state.pop("abandoned") is None
            before_state.pop("abandoned")
            assert after_state == before_state, "I6: a late answer changed the guard"
            return
        assert effects.abandoned == current.token
        assert effects.moved == set(current.batch_ids)
        assert not effects.stops
        assert not effects.cancels
        self.check_retry_frozen(
            {b: before[b] for b in before if b in current.batch_ids}, in_flight_fence=False
        )
        for b, (_, old) in before.items():
            if b not in current.batch_ids:
                assert core.batch(b) == old
        self.absorb(effects)

    @precondition(lambda self: self.core is not None)
    @rule(data=st.data())
    def stale_token_answer(self, data: st.DataObject) -> None:
        """I6: an answer for a renewal already settled (or never issued) is ignored."""
        settled = sorted(t for t, c in self.calls.items() if c.state == "settled")
        token = data.draw(st.sampled_from([*settled, UNKNOWN]))
        renewal = self.calls[token].renewal if token in self.calls else None
        before = self.snapshot()
        if data.draw(st.booleans(), label="answers"):
            verdicts = (
                self.draw_verdicts(data, renewal)
                if renewal is not None
                else dict.fromkeys(self.jobs, Verdict.EXTENDED)
            )
            effects = self.g.answered(token, self.now, verdicts)
        else:
            effects = self.g.failed(token, self.now)
        assert effects == Effects()
        assert self.snapshot() == before, "I6: a stale answer changed the guard"
        self.guard_may_run(data)  # the runtime pokes the guard after every answer

    # -- notices and shutdown -----------------------------------------------------------

    @precondition(lambda self: self.core is not None)
    @rule(data=st.data())
    def cancel_notice(self, data: st.DataObject) -> None:
        """I12: a cancel notice makes the job's batch due at once (and pokes the guard)."""
        self.notify(data.draw(st.sampled_from([*sorted(self.jobs), UNKNOWN])))
        self.guard_may_run(data)

    def notify(self, job_id: int) -> None:
        known = job_id in self.jobs and self.jobs[job_id].batch_id in self.batches
        assert self.g.request_renewal(job_id, self.now) == known
        if known:
            self.batches[self.jobs[job_id].batch_id].notice = True
            batch = self.g.batch(self.jobs[job_id].batch_id)
            assert batch.next_due <= self.now
            alive = self.g.fence_time(batch) > self.now  # else lost now (refinement 16)
            if self.g.current is None and renewable(batch) and alive:
                assert self.g.next_wake(self.now) <= self.now

    @precondition(
        lambda self: (
            self.core is not None and self.may_shut_down and self.core.shutdown_at == math.inf
        )
    )
    @rule(grace=st.floats(0.0, 2.0))
    def begin_shutdown(self, grace: float) -> None:
        core, now = self.g, self.now
        grace *= self.timing.visibility_timeout
        effects = core.begin_shutdown(now, grace)
        assert core.shutdown_at == now + grace
        assert effects == Effects(moved=set(self.batches))
        self.absorb(effects)
        later = core.begin_shutdown(now, grace + 1.0)  # a second, longer one extends nothing
        assert core.shutdown_at == now + grace
        self.absorb(later)

    @precondition(lambda self: self.core is not None and bool(self.batches))
    @rule(data=st.data())
    def observe_batch_stops(self, data: st.DataObject) -> None:
        """I8: the runtime asks why a batch (or each) stopped: frozen at first sight, fixed
        order (lease > duration > shutdown when they pass together)."""
        core, now, d = self.g, self.now, self.timing.max_job_duration
        batch_ids = sorted(self.batches)
        if not data.draw(st.booleans(), label="every batch"):
            batch_ids = [data.draw(st.sampled_from(batch_ids))]
        for batch_id in batch_ids:
            model = self.batches[batch_id]
            batch = core.batch(batch_id)
            frozen, lost = batch.stop, batch.lost
            fence = core.fence_time(batch)
            duration = math.inf if d is None else model.registered_at + d
            stop = core.batch_stop(batch_id, now)
            if frozen is not None:
                assert stop is frozen
            else:
                assert stop is expected_stop(fence, duration, core.shutdown_at, now)
            assert batch.lost == (lost or fence <= now), "the lease is lost at the fence"

    # -- invariants ---------------------------------------------------------------------

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I2_fence_never_outlives_the_granted_lease(self) -> None:
        """I2: the fence ends by the database's lease of every running job (+0.25 s while a
        renewal carrying the batch is in flight)."""
        core = self.g
        for b in self.batches:
            batch = core.batch(b)
            running = [job.job_id for job in batch.jobs.values() if runs_with_its_row(job)]
            if not running:
                continue
            granted = min(self.jobs[j].granted for j in running)
            in_flight = core.current is not None and b in core.current.batch_ids
            slack = GRACE if in_flight else 0.0
            fence = core.fence_time(batch)
            assert fence <= granted + slack + EPS, (b, fence, granted, in_flight)

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I2_lease_deadline_never_moves_backwards(self) -> None:
        for b, model in self.batches.items():
            lease = self.g.batch(b).lease_deadline
            assert lease >= model.lease
            model.lease = lease

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I2_runtime_scope_deadlines_follow_effects(self) -> None:
        """I2: a runtime that moves scopes only as Effects.moved says never holds a stale one."""
        for b, model in self.batches.items():
            assert model.scope == self.g.scope_deadline(b), b

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I4_scope_deadline_is_min_of_fence_duration_and_shutdown(self) -> None:
        """I4: one cancel scope per batch, its deadline ``min(fence, registration + D,
        shutdown)``: claim hooks and handler stop at registration + D at the latest."""
        core, d = self.g, self.timing.max_job_duration
        for b, model in self.batches.items():
            duration = math.inf if d is None else model.registered_at + d
            fence = core.fence_time(core.batch(b))
            assert core.scope_deadline(b) == min(fence, duration, core.shutdown_at)

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I5_at_most_two_connections(self) -> None:
        """I5: at most one abandoned renewal, so at most two connections held by renewals."""
        core = self.g
        assert core.connections_held() <= 2
        assert core.beating == (self.beat_out is not None)
        states = [call.state for call in self.calls.values()]
        assert states.count("current") == (core.current is not None)
        assert states.count("abandoned") == (core.abandoned is not None)
        assert (core.abandoned.token if core.abandoned else None) == self.abandoned
        if core.current is not None:
            assert self.calls[core.current.token].state == "current"
            # The guard must wake to abandon it, unless another renewal already is.
            taken = core.abandoned is not None or core.beating
            expected = math.inf if taken else core.current.abandon_at
            assert core.next_wake(self.now) == expected

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I8_stop_reason_never_changes(self) -> None:
        for b, model in self.batches.items():
            stop = self.g.batch(b).stop
            if model.stop is not None:
                assert stop is model.stop, (b, model.stop, stop)
            model.stop = stop

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I8_a_lost_lease_stays_lost(self) -> None:
        for b, model in self.batches.items():
            batch = self.g.batch(b)
            if model.lost:
                assert batch.lost
            if batch.lost:
                assert batch.stop is not None, "a lost lease stops the batch"
            model.lost = batch.lost

    @precondition(lambda self: self.core is not None)
    @invariant()
    def renewed_means_running_with_its_row(self) -> None:
        for b in self.batches:
            for job in self.g.batch(b).jobs.values():
                assert job.renewed == runs_with_its_row(job), job

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I13_running_handler_keeps_its_lease_renewed(self) -> None:
        """docs/protocol.rst §4: a batch with a handler still running on a row it still holds,
        and whose fence has not passed, is carried by the current renewal or due for one
        within a heartbeat, with the guard set to wake for it: whatever stopped its scope
        (duration, cancel, shutdown). Else its lease lapses while the handler runs, and
        another worker runs the same job at the same time (I13)."""
        core, now, h = self.g, self.now, self.timing.heartbeat_interval
        current = core.current
        for b in self.batches:
            batch = core.batch(b)
            if core.fence_time(batch) <= now:
                continue  # the lease is lost: only the fence ends renewals early
            if not any(runs_with_its_row(job) for job in batch.jobs.values()):
                continue  # every handler exited (or its row is someone else's)
            if current is not None and b in current.batch_ids:
                continue
            assert batch.next_due <= now + h + EPS, (b, batch.next_due, now)
            if current is None and batch.next_due < batch.lease_deadline:
                # A batch due at or after its fence is not woken for: it will be lost by
                # then (docs/protocol.rst §10, refinement 16).
                wake = core.next_wake(now)
                assert wake <= batch.next_due, (b, batch.stop, wake)

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I8_stopped_batch_scope_stays_expired(self) -> None:
        """I8: once the core says a batch stopped, its scope deadline has passed for good,
        so the handler gets exactly one cancellation and never a second life."""
        for b, model in self.batches.items():
            if self.g.batch(b).stop is not None:
                assert model.scope <= self.now

    @precondition(lambda self: self.core is not None)
    @invariant()
    def I8_each_job_stopped_and_cancelled_at_most_once(self) -> None:
        for job in self.jobs.values():
            assert job.stopped <= 1
            assert job.cancelled <= 1


GuardMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)
TestGuard = GuardMachine.TestCase
