"""Conformance traces: the decisions the protocol's core must make, input by input.

A *trace* is a JSON document: the timings of one guard, then a list of **steps**. Each step
is one timed **input** (a claim answered, a renewal answered or failed, the guard waking, a
handler exiting, ...) and the **decisions** the reference core made after it (the renewal
issued, the stops and cancels delivered, the cancel-scope deadlines, the outcome and the
hooks run, the connections held, when the guard wakes next). A port feeds the inputs to its
own core, in order, and compares its decisions with the trace's: docs/porting.rst says
how, and ``proofs/traces/schema.json`` gives the format.

Theory of operation. :class:`Recorder` plays the trio runtime around the real
:class:`~trioqueue._core.guard_rules.GuardCore` (imported, never copied) in the runtime's
own order of calls (``trioqueue._runtime.guard`` and ``batch``): a claim is registered, its
hooks start and the guard is poked; a poke or a wake runs one pass of the guard loop
(``poll``, then ``next_renewal``); a renewal's exit is ``answered`` or ``failed`` followed
by a poke; a handler's exit decides its outcome with :func:`~trioqueue._core.outcome.decide_attempt`
exactly as the batch runner does, then ``job_done``, and the batch leaves the guard after
its last job. Cancel scopes are mirrored: a scope's deadline changes only when an
``Effects.moved`` names its batch (as :meth:`Guard.apply` does), and a scope whose deadline
has passed is cancelled for good, like trio's.

Checkpoints (docs/protocol.rst §16) and batch handlers (§20) are traced too. A
``checkpoint`` input leaves a value's JSON text on the job's lease as ``ctx.checkpoint``
does; a renewal item carries a ``checkpoint`` only when the core sends one (the database
does not hold the latest yet), and a handler's outcome names the ``checkpoint`` its final
write carries. A claim with ``"batch_handler": true`` runs its jobs in one batch handler
call under the batch scope alone: a job's own stop cancels that scope only once every job
of the batch has one, and a ``batch_exit`` input ends the call with its answer, read by
:func:`~trioqueue._core.batch_outcome.read_answer` and decided job by job with
``decide_attempt`` as the batch call runner does.

Nothing here waits or reads a clock: time is the ``at`` of each input, in seconds from the
trace's start, and only moves forward. A script may say ``{"kind": "sleep", "until": t}``:
the recorder expands it into the guard's own wakes (at each ``next_wake``) and the scope
deadlines passing, so the recorded trace holds primitive inputs only.

Not covered: the pool's lone beats, writes that fail or are fenced out (every outcome is
taken to be written), the handler's database connection (``no_connection``), backoff
delays. They are runtime or backend matters; the decisions here are the core's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trioqueue._core.batch_outcome import (
    BatchOutcome,
    JobFailed,
    JobRetry,
    JobSucceeded,
    missing_message,
    read_answer,
)
from trioqueue._core.checkpoint import CheckpointSlot, latest_checkpoint
from trioqueue._core.guard_rules import Effects, GuardCore, Renewal
from trioqueue._core.outcome import decide_attempt
from trioqueue._core.progress import valid_progress
from trioqueue._core.rules import OutcomeKind, StopReason
from trioqueue._core.snooze import Snooze
from trioqueue._core.timing import Timing
from trioqueue._core.wire import Verdict
from trioqueue._runtime.batch import EXPIRED_ON_ARRIVAL

__all__ = [
    "FORMAT",
    "INPUT_KINDS",
    "Mismatch",
    "Recorder",
    "ScriptError",
    "dumps",
    "load",
    "record",
    "replay",
    "same",
    "script_of",
    "timing_of",
    "traces_in",
]

#: The ``format`` field of every trace this module writes and reads.
FORMAT = "trioqueue-trace/1"

#: Every primitive input kind a trace may hold (a script may also say ``sleep``).
INPUT_KINDS = (
    "claim",
    "wake",
    "tick",
    "answer",
    "fail",
    "cancel_notice",
    "progress",
    "checkpoint",
    "handler_exit",
    "batch_exit",
    "shutdown",
)

#: The hook the batch runner calls for each outcome (``BatchRunner._report``); a snooze
#: calls none (docs/protocol.rst §17).
OUTCOME_HOOKS: dict[OutcomeKind, str | None] = {
    OutcomeKind.SUCCEEDED: "on_job_succeeded",
    OutcomeKind.RETRY: "on_job_retry",
    OutcomeKind.FAILED: "on_job_failed",
    OutcomeKind.RELEASE: "on_job_unavailable",
    OutcomeKind.SNOOZE: None,
    OutcomeKind.UNAVAILABLE: "on_job_unavailable",
}

Json = dict[str, Any]


class ScriptError(ValueError):
    """A script asks for something the runtime could never do (time going back, a handler
    exiting twice, a job that was never claimed)."""


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One decision of a replay that differs from the trace's."""

    step: int  # index into the trace's steps
    kind: str  # the step's input kind
    field: str  # the decision that differs
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return (
            f"step {self.step} ({self.kind}): {self.field} differs: "
            f"trace has {self.expected!r}, the core decided {self.actual!r}"
        )


@dataclass(slots=True)
class _Job:
    batch_id: int
    attempt: int
    max_attempts: int
    running: bool = True
    one_call: bool = False  # its batch runs in one batch handler call (§20)


@dataclass(slots=True)
class _Scope:
    """The runtime's cancel scope of one batch, as trio would hold it."""

    deadline: float
    single: bool  # a batch of one job: its job's stops cancel this very scope
    one_call: bool = False  # a batch handler's call: cancelled once every job is stopped
    cancel_called: bool = False
    job_ids: list[int] = field(default_factory=list)


class Recorder:
    """Plays the runtime around one :class:`GuardCore`, input by input, writing the trace.

    ``feed`` takes one script input and returns the steps it recorded (a ``sleep`` gives
    several). The read-only helpers (``now``, ``current_token``, ``running_jobs``, ...) let
    a scenario or a property test pick its next input from the state reached so far.
    """

    def __init__(
        self,
        timing: Timing,
        *,
        name: str = "",
        description: str = "",
        wall_offset: float = 1000.0,
    ) -> None:
        self.core = GuardCore(timing)
        self.timing = timing
        self.name = name
        self.description = description
        self.wall_offset = wall_offset  # the database's wall clock minus the local one
        self.now = 0.0
        self.steps: list[Json] = []
        self._scopes: dict[int, _Scope] = {}
        self._jobs: dict[int, _Job] = {}
        self._next_batch_id = 1
        self._tokens: list[int] = []  # every token issued, in order

    # -- what a script may look at ----------------------------------------------------

    def current_token(self) -> int | None:
        return None if self.core.current is None else self.core.current.token

    def abandoned_token(self) -> int | None:
        return None if self.core.abandoned is None else self.core.abandoned.token

    def current(self) -> Renewal | None:
        return self.core.current

    def issued_tokens(self) -> list[int]:
        return list(self._tokens)

    def running_jobs(self) -> list[int]:
        """Jobs whose handler has not exited yet."""
        return sorted(job_id for job_id, job in self._jobs.items() if job.running)

    def handler_jobs(self) -> list[int]:
        """Running jobs each in a handler of its own (not in a batch handler's call)."""
        return [job_id for job_id in self.running_jobs() if not self._jobs[job_id].one_call]

    def batch_calls(self) -> dict[int, list[int]]:
        """The batch handler calls running: batch id → its jobs, in the batch's order."""
        return {b: list(s.job_ids) for b, s in sorted(self._scopes.items()) if s.one_call}

    def claimed_jobs(self) -> list[int]:
        return sorted(self._jobs)

    def trace(self) -> Json:
        return {
            "format": FORMAT,
            "name": self.name,
            "description": self.description,
            "timing": {
                "visibility_timeout": self.timing.visibility_timeout,
                "heartbeat_interval": self.timing.heartbeat_interval,
                "max_job_duration": self.timing.max_job_duration,
            },
            "wall_offset": self.wall_offset,
            "steps": self.steps,
        }

    # -- feeding inputs ---------------------------------------------------------------

    def feed(self, script_input: Mapping[str, Any]) -> list[Json]:
        """Carry out one input; return the steps recorded for it."""
        kind = script_input.get("kind")
        if kind == "sleep":
            return self._sleep(float(script_input["until"]))
        if kind not in INPUT_KINDS:
            raise ScriptError(f"unknown input kind {kind!r}")
        given = dict(script_input)
        at = float(given.get("at", self.now))
        if at < self.now or not math.isfinite(at):
            raise ScriptError(f"{kind} at {at}: time only moves forward (now {self.now})")
        given["at"] = at
        step_input = {"kind": kind, "at": at, **{k: v for k, v in given.items() if k != "kind"}}
        self.now = at
        decisions = _Decisions()
        self._fire_scopes(decisions)
        getattr(self, f"_on_{kind}")(given, decisions)
        self._fire_scopes(decisions)  # a deadline moved to now or earlier fires at once
        step = {"input": step_input, "decisions": self._close(decisions)}
        self.steps.append(step)
        return [step]

    def _sleep(self, until: float) -> list[Json]:
        """Let time pass to ``until`` as the runtime would: the guard wakes at each of its
        wake times, and each scope deadline passing is a tick."""
        steps = self.catch_up(until)
        if until > self.now:
            steps += self.feed({"kind": "tick", "at": until})
        return steps

    def catch_up(self, until: float) -> list[Json]:
        """Feed what happens by itself up to ``until``: the guard's wakes at its
        ``next_wake`` (up to and at ``until``: under trio, time passes and timers fire
        before anything else happens at that time), and a tick at each scope deadline
        before ``until`` (one at ``until`` fires with the input there anyway)."""
        steps: list[Json] = []
        while True:
            wake = self.core.next_wake(self.now)
            deadline = min(
                (s.deadline for s in self._scopes.values() if not s.cancel_called),
                default=math.inf,
            )
            when = max(self.now, min(wake, deadline))
            if when > until or (deadline < wake and when == until):
                return steps
            before = (self.current_token(), self.abandoned_token(), wake)
            kind = "tick" if deadline < wake else "wake"
            steps += self.feed({"kind": kind, "at": when})
            after = (self.current_token(), self.abandoned_token(), self.core.next_wake(self.now))
            if kind == "wake" and after == before and wake <= self.now:
                raise ScriptError(f"the guard would spin at {self.now}: its wake changes nothing")

    # -- one handler per input kind ---------------------------------------------------

    def _on_claim(self, given: Json, out: _Decisions) -> None:
        jobs = given["jobs"]
        if not jobs:
            raise ScriptError("a claim delivers at least one job")
        for job in jobs:
            if job["job_id"] in self._jobs:
                raise ScriptError(f"job {job['job_id']} was claimed already in this trace")
        batch_id = self._next_batch_id
        self._next_batch_id += 1
        # Guard.register: the lease counts from the earliest lock (docs/protocol.rst §1).
        locked = float(given["claim_sent"]) + min(float(j["locked_after"]) for j in jobs)
        accepted = self.core.register(
            batch_id,
            [(int(j["job_id"]), int(j["claim_seq"])) for j in jobs],
            claim_sent=locked,
            now=self.now,
            wall_now=self.now + self.wall_offset,
            row_deadlines=[float(j["lease_until"]) for j in jobs],
        )
        out.result = {"batch_id": batch_id, "accepted": accepted}
        if not accepted:  # BatchRunner.reject: no handler ever runs (I7)
            for job in jobs:
                out.hooks += [
                    [job["job_id"], "on_job_claimed"],
                    [job["job_id"], "on_job_unavailable"],
                ]
            out.result["outcomes"] = [
                _outcome(job["job_id"], OutcomeKind.UNAVAILABLE, EXPIRED_ON_ARRIVAL, None)
                for job in jobs
            ]
            return
        one_call = given.get("batch_handler", False) is True
        self._scopes[batch_id] = _Scope(
            deadline=self.core.scope_deadline(batch_id),
            single=len(jobs) == 1,
            one_call=one_call,
            job_ids=[int(j["job_id"]) for j in jobs],
        )
        for job in jobs:
            job_id = int(job["job_id"])
            self._jobs[job_id] = _Job(
                batch_id, int(job["attempt"]), int(job["max_attempts"]), one_call=one_call
            )
            out.hooks.append([job_id, "on_job_claimed"])
            if not one_call:
                out.hooks.append([job_id, "handler"])
        if one_call:  # the claim hooks one after the other, then the one call
            out.hooks.append([int(jobs[0]["job_id"]), "batch_handler"])
        self._guard_pass(out)  # Guard.register pokes: the first beat is immediate

    def _on_wake(self, given: Json, out: _Decisions) -> None:
        self._guard_pass(out)

    def _on_tick(self, given: Json, out: _Decisions) -> None:
        pass  # only time passes: scope deadlines fire (before and after every input)

    def _on_answer(self, given: Json, out: _Decisions) -> None:
        verdicts = {int(job_id): Verdict(value) for job_id, value in given["verdicts"]}
        self._apply(self.core.answered(int(given["token"]), self.now, verdicts), out)
        self._guard_pass(out)  # Guard._renew pokes after every exit

    def _on_fail(self, given: Json, out: _Decisions) -> None:
        if given.get("how") not in ("error", "timeout"):
            raise ScriptError("a failed renewal says how: 'error' or 'timeout'")
        self._apply(self.core.failed(int(given["token"]), self.now), out)
        self._guard_pass(out)

    def _on_cancel_notice(self, given: Json, out: _Decisions) -> None:
        requested = self.core.request_renewal(int(given["job_id"]), self.now)
        out.result = {"requested": requested}
        if requested:  # Guard.cancel_notice pokes only then
            self._guard_pass(out)

    def _on_progress(self, given: Json, out: _Decisions) -> None:
        job_id = int(given["job_id"])
        job = self._running(job_id, "reports progress")
        kept = valid_progress(decode_value(given["value"]))
        lease = self.core.job(job.batch_id, job_id)
        if kept is not None:  # JobContext.report_progress
            lease.progress = kept
        out.result = {"kept": kept, "progress": lease.progress}

    def _on_checkpoint(self, given: Json, out: _Decisions) -> None:
        job_id = int(given["job_id"])
        job = self._running(job_id, "checkpoints")
        if job.one_call:
            raise ScriptError(f"job {job_id} runs in a batch handler call: no ctx.checkpoint")
        text = given["value"]
        if not isinstance(text, str):
            raise ScriptError("a checkpoint's value is its JSON text, a string")
        lease = self.core.job(job.batch_id, job_id)
        if lease.checkpoint is None:  # JobContext.checkpoint
            lease.checkpoint = CheckpointSlot(text)
        else:
            lease.checkpoint.latest = text

    def _on_handler_exit(self, given: Json, out: _Decisions) -> None:
        job_id = int(given["job_id"])
        job = self._running(job_id, "exits")
        if job.one_call:
            raise ScriptError(f"job {job_id} runs in a batch handler call: it ends by batch_exit")
        error = given.get("error")
        scope = self._scopes[job.batch_id]
        # As the batch runner decides it (BatchRunner._finished).
        outcome, stop = decide_attempt(
            job_stop=self.core.job(job.batch_id, job_id).stop,
            scope_fired=scope.cancel_called,
            batch_stop=lambda: self.core.batch_stop(job.batch_id, self.now),
            error=error,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            max_job_duration=self.timing.max_job_duration,
            snooze=given.get("snooze"),  # the seconds of a Snooze it answered (§17)
        )
        decided = _outcome(job_id, outcome.kind, outcome.message, stop)
        slot = self.core.job(job.batch_id, job_id).checkpoint
        if slot is not None:  # the final write carries the latest (§16)
            decided["checkpoint"] = latest_checkpoint(slot)
        out.result = {"outcome": decided}
        self.core.job_done(job.batch_id, job_id)  # after the write (BatchRunner._settle)
        job.running = False
        hook = OUTCOME_HOOKS[outcome.kind]
        if hook is not None:
            out.hooks.append([job_id, hook])
        if not any(self._jobs[j].running for j in scope.job_ids):
            # BatchRunner.run's finally: the batch leaves the guard after its last job.
            self.core.unregister(job.batch_id)
            del self._scopes[job.batch_id]
            out.unregistered.append(job.batch_id)

    def _on_batch_exit(self, given: Json, out: _Decisions) -> None:
        batch_id = int(given["batch_id"])
        scope = self._scopes.get(batch_id)
        if scope is None or not scope.one_call:
            raise ScriptError(f"batch {batch_id} is no batch handler call that is running")
        said = _said(given["answer"], scope.job_ids)
        outcomes = []
        for job_id in scope.job_ids:
            job = self._jobs[job_id]
            error, delay, snooze = said[job_id]
            # As the batch call runner decides each job (BatchCallRunner._decided).
            outcome, stop = decide_attempt(
                job_stop=self.core.job(batch_id, job_id).stop,
                scope_fired=scope.cancel_called,
                batch_stop=lambda: self.core.batch_stop(batch_id, self.now),
                error=error,
                attempt=job.attempt,
                max_attempts=job.max_attempts,
                max_job_duration=self.timing.max_job_duration,
                snooze=snooze,  # the seconds of a Snooze it answered for the job (§17)
            )
            decided = _outcome(job_id, outcome.kind, outcome.message, stop)
            if delay is not None and outcome.kind is OutcomeKind.RETRY:
                decided["delay"] = delay  # the handler's own, not the pool's backoff
            outcomes.append(decided)
            hook = OUTCOME_HOOKS[outcome.kind]
            if hook is not None:  # a snooze has none (§17)
                out.hooks.append([job_id, hook])
        out.result = {"outcomes": outcomes}
        for job_id in scope.job_ids:  # one hand-over to the writer, then settled
            self.core.job_done(batch_id, job_id)
            self._jobs[job_id].running = False
        self.core.unregister(batch_id)
        del self._scopes[batch_id]
        out.unregistered.append(batch_id)

    def _on_shutdown(self, given: Json, out: _Decisions) -> None:
        self._apply(self.core.begin_shutdown(self.now, float(given["grace"])), out)

    # -- the runtime's moves ----------------------------------------------------------

    def _guard_pass(self, out: _Decisions) -> None:
        """One pass of ``Guard.run``'s loop: poll, then the renewal the core offers."""
        self._apply(self.core.poll(self.now), out)
        renewal = self.core.next_renewal(self.now)
        if renewal is not None:
            self._tokens.append(renewal.token)
            out.renewal = _renewal(renewal)
            self._apply(Effects(moved=set(renewal.batch_ids)), out)

    def _apply(self, effects: Effects, out: _Decisions) -> None:
        """``Guard.apply``: move deadlines, then deliver cancels, stops, the abandonment."""
        for batch_id in sorted(effects.moved):
            scope = self._scopes.get(batch_id)
            if scope is not None:
                scope.deadline = self.core.scope_deadline(batch_id)
        for batch_id, job_id in effects.cancels:
            out.cancels.append([batch_id, job_id])
            self._stop_job(batch_id, out)
        for batch_id, job_id, reason in effects.stops:
            out.stops.append([batch_id, job_id, reason.name])
            self._stop_job(batch_id, out)
        if effects.abandoned is not None:
            out.abandoned = effects.abandoned

    def _stop_job(self, batch_id: int, out: _Decisions) -> None:
        scope = self._scopes.get(batch_id)
        if scope is None or scope.cancel_called:
            return
        if scope.single:  # a batch of one uses the batch scope: the stop is delivered so
            scope.cancel_called = True
        elif self._every_job_stopped(batch_id, scope):
            scope.cancel_called = True  # the batch handler's call is cancelled: it fires
            out.scopes_fired.append(batch_id)

    def _every_job_stopped(self, batch_id: int, scope: _Scope) -> bool:
        """BatchHandle.stop_job: a batch handler's call is cancelled once every job of it
        has a stop of its own; until then it goes on for the others (§20)."""
        return scope.one_call and all(
            self.core.job(batch_id, job_id).stop is not None for job_id in scope.job_ids
        )

    def _fire_scopes(self, out: _Decisions) -> None:
        for batch_id, scope in sorted(self._scopes.items()):
            if not scope.cancel_called and scope.deadline <= self.now:
                scope.cancel_called = True
                out.scopes_fired.append(batch_id)

    def _running(self, job_id: int, what: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None or not job.running:
            raise ScriptError(f"job {job_id} {what}, but its handler is not running")
        return job

    def _close(self, out: _Decisions) -> Json:
        wake = self.core.next_wake(self.now)
        return {
            "scopes_fired": out.scopes_fired,
            "result": out.result,
            "renewal": out.renewal,
            "abandoned": out.abandoned,
            "cancels": out.cancels,
            "stops": out.stops,
            "hooks": out.hooks,
            "unregistered": out.unregistered,
            "scope_deadlines": [[b, s.deadline] for b, s in sorted(self._scopes.items())],
            "connections_held": self.core.connections_held(),
            "next_wake": None if math.isinf(wake) else wake,
        }


@dataclass(slots=True)
class _Decisions:
    scopes_fired: list[int] = field(default_factory=list)
    result: Json | None = None
    renewal: Json | None = None
    abandoned: int | None = None
    cancels: list[list[int]] = field(default_factory=list)
    stops: list[list[Any]] = field(default_factory=list)
    hooks: list[list[Any]] = field(default_factory=list)
    unregistered: list[int] = field(default_factory=list)


def _renewal(renewal: Renewal) -> Json:
    # Items sorted by job: the order of rows in one statement is free (docs/porting.rst).
    items = sorted(renewal.items, key=lambda item: item.job_id)
    return {
        "token": renewal.token,
        "batch_ids": sorted(renewal.batch_ids),
        "items": [_item(i.job_id, i.claim_seq, i.progress, i.checkpoint) for i in items],
        "sent_at": renewal.sent_at,
        "give_up_at": renewal.give_up_at,
    }


def _item(job_id: int, claim_seq: int, progress: float | None, checkpoint: str | None) -> Json:
    """A renewal's row: its ``checkpoint`` only when it carries one (§16)."""
    item: Json = {"job_id": job_id, "claim_seq": claim_seq, "progress": progress}
    if checkpoint is not None:
        item["checkpoint"] = checkpoint
    return item


#: What each job's attempt came to in a batch handler's call: its error's text (None: no
#: error) and the retry delay the handler asked for (None: the pool's backoff).
#: Per job of a batch call: the error it was given, its retry delay, its snooze's seconds.
_Said = dict[int, tuple[str | None, float | None, float | None]]


def _said(answer: Json, job_ids: list[int]) -> _Said:
    """A ``batch_exit``'s ``answer`` (schema.json), as ``BatchCallRunner._said`` reads the
    call's: raised, unwound (no answer: the stops decide), or an answer to read."""
    if "raised" in answer:
        return dict.fromkeys(job_ids, (str(answer["raised"]), None, None))
    if answer.get("unwound") is True:
        return dict.fromkeys(job_ids, (None, None, None))
    given: object = None  # {"none": true}: the call returned None
    if "by_id" in answer:
        given = {int(key): _decode_outcome(value) for key, value in answer["by_id"]}
    elif "in_order" in answer:
        given = [_decode_outcome(value) for value in answer["in_order"]]
    elif answer.get("none") is not True:
        raise ScriptError(f"not a batch handler's answer: {answer!r}")
    outcomes, unusable = read_answer(given, job_ids)
    if unusable is not None:
        return dict.fromkeys(job_ids, (unusable, None, None))
    return {job_id: _said_of(job_id, outcomes.get(job_id)) for job_id in job_ids}


def _said_of(
    job_id: int, outcome: BatchOutcome | None
) -> tuple[str | None, float | None, float | None]:
    if outcome is None:
        return missing_message(job_id), None, None
    if isinstance(outcome, JobSucceeded):
        return None, None, None
    if isinstance(outcome, Snooze):
        return None, None, outcome.seconds
    assert isinstance(outcome.error, str)  # a trace names errors in words
    return outcome.error, float(outcome.delay) if isinstance(outcome, JobRetry) else None, None


def _decode_outcome(value: Json) -> object:
    """One outcome of an answer: ``{"kind": "succeeded"}``, ``{"kind": "failed", "error":
    text}``, ``{"kind": "retry", "delay": s, "error": text}`` (error optional),
    ``{"kind": "snooze", "seconds": s}`` (a ``Snooze``, §17), or ``{"kind":
    "not_an_outcome"}``: a value that is none (the answer is then unusable)."""
    kind = value.get("kind")
    if kind == "succeeded":
        return JobSucceeded()
    if kind == "failed":
        return JobFailed(str(value["error"]))
    if kind == "retry":
        if "error" in value:
            return JobRetry(float(value["delay"]), str(value["error"]))
        return JobRetry(float(value["delay"]))
    if kind == "snooze":
        return Snooze(float(value["seconds"]))
    if kind == "not_an_outcome":
        return "not an outcome"
    raise ScriptError(f"not a batch handler's outcome: {value!r}")


def _outcome(job_id: int, kind: OutcomeKind, message: str | None, stop: StopReason | None) -> Json:
    return {
        "job_id": job_id,
        "kind": kind.value,
        "message": message,
        "stop": None if stop is None else stop.name,
    }


def decode_value(value: Any) -> object:
    """A progress value as a handler passed it: ``{"float": "nan"}`` stands for the
    floats JSON cannot write (``nan``, ``inf``, ``-inf``)."""
    if isinstance(value, dict):
        return float(value["float"])
    return value


# -- whole traces ------------------------------------------------------------------------


def timing_of(document: Mapping[str, Any]) -> Timing:
    timing = document["timing"]
    duration = timing["max_job_duration"]
    return Timing(
        visibility_timeout=float(timing["visibility_timeout"]),
        heartbeat_interval=float(timing["heartbeat_interval"]),
        max_job_duration=None if duration is None else float(duration),
    )


def record(script: Mapping[str, Any]) -> Json:
    """Record the trace of a script: its header (``name``, ``description``, ``timing``,
    ``wall_offset``) and ``inputs``, played in order through the reference core."""
    recorder = Recorder(
        timing_of(script),
        name=script.get("name", ""),
        description=script.get("description", ""),
        wall_offset=float(script.get("wall_offset", 1000.0)),
    )
    for script_input in script["inputs"]:
        recorder.feed(script_input)
    return recorder.trace()


def script_of(trace: Mapping[str, Any]) -> Json:
    """The script a trace was recorded from (its inputs, each with its time)."""
    header = {k: v for k, v in trace.items() if k not in ("format", "steps")}
    return {**header, "inputs": [step["input"] for step in trace["steps"]]}


def replay(trace: Mapping[str, Any]) -> list[Mismatch]:
    """Feed the trace's inputs to the current core; every decision that differs.

    An empty list means the core reproduces the trace exactly. Replay stops at the first
    step that differs (later steps would only echo it), or at an input the core's runtime
    refuses.
    """
    if trace.get("format") != FORMAT:
        return [Mismatch(-1, "header", "format", FORMAT, trace.get("format"))]
    recorder = Recorder(timing_of(trace), wall_offset=float(trace["wall_offset"]))
    for index, step in enumerate(trace["steps"]):
        kind = step["input"]["kind"]
        try:
            (got,) = recorder.feed(step["input"])
        except ScriptError as exc:
            return [Mismatch(index, kind, "input", "accepted", f"refused: {exc}")]
        # Through JSON, as a port would read it: lists, not tuples; ints stay ints.
        actual = json.loads(json.dumps(got["decisions"]))
        found = [
            Mismatch(index, kind, name, expected, actual.get(name))
            for name, expected in step["decisions"].items()
            if not same(actual.get(name), expected)
        ]
        found += [
            Mismatch(index, kind, name, None, actual[name])
            for name in actual
            if name not in step["decisions"]
        ]
        if found:
            return found
    return []


def same(a: Any, b: Any) -> bool:
    """JSON values equal as a port would compare them: numbers by value (``30`` is
    ``30.0``), but a boolean is no number (``true`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if a != b:
        return False
    return type(a) is type(b) or {type(a), type(b)} == {int, float}


def dumps(trace: Mapping[str, Any]) -> str:
    """The trace as checked in: a step's input on one line, its decisions on the next, so a
    diff names the step that changed. Stable, ending in a newline."""

    def one(value: Any) -> str:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)

    header = [f" {one(key)}: {one(value)}" for key, value in trace.items() if key != "steps"]
    steps = [
        f'  {{"input": {one(step["input"])},\n   "decisions": {one(step["decisions"])}}}'
        for step in trace["steps"]
    ]
    body = ",\n".join(steps)
    return "{\n" + ",\n".join([*header, f' "steps": [\n{body}\n ]']) + "\n}\n"


def load(path: str | Path) -> Json:
    loaded: Json = json.loads(Path(path).read_text(encoding="utf-8"))
    return loaded


def traces_in(directory: str | Path) -> Iterable[Path]:
    """Every trace file of a directory (``schema.json`` aside), sorted by name."""
    return sorted(p for p in Path(directory).glob("*.json") if p.name != "schema.json")
