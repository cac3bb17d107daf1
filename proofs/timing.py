"""Timing bounds of the guard, proved with z3 about the core's own code, for every value.

Each proof runs the very functions that run in production (``GuardCore.register``,
``next_renewal``, ``answered``, ``failed``, ``poll``, ``fence_time``, ``scope_deadline``,
``next_wake``, and through them ``trioqueue._core.fence`` and ``trioqueue._core.timing``)
with symbolic times (:mod:`symbolic`): every path the code can take is explored, and z3
asks whether the claim can fail on any of them, for any real values that meet the
assumptions. ``proved`` means it cannot; change the code, and what is proved changes with it.

Each proof has a *negative twin*: the same question asked of a core with one rule broken
(a function patched in the module that calls it, or a subclass that misuses the public
API), or of a world with a weaker assumption. It must come back with a counterexample,
which shows that the question is strong enough to catch that mistake.

Time is split into the worker's local clock and the database's wall clock, with
``wall = local + k`` for a fixed offset ``k`` ("synchronised clocks", docs/protocol.rst
§8). A local time ``u`` at which the database ran a statement is used where the database's
``now()`` matters; every delay is a real number ``>= 0``.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import z3
from symbolic import (
    Num,
    Verdict,
    all_of,
    implies,
    largest,
    prove,
    reals,
    smallest,
    term,
    value_of,
)

from trioqueue._core import guard_rules, outcome
from trioqueue._core.guard_rules import Effects, GuardCore, Renewal
from trioqueue._core.rules import VERDICT_RULES, OutcomeKind, StopReason, VerdictRule
from trioqueue._core.timing import GRACE, MIN_RETRY, Timing
from trioqueue._core.wire import Verdict as RowVerdict

# The symbols every proof draws on (a z3 constant is its name: these are shared).
V, H, D = reals("V H D")
K = reals("k")[0]  # wall = local + k
T0, SENT, ARRIVE, U = reals("registered renewal_sent answer_arrives db_ran_renewal")
LOSS, D_OUT, D_BACK, D_OUT2 = reals("database_lost d_out d_back d_out_next")
SENT2, LATER, LATER2 = reals("second_sent later even_later")
ROW1, ROW2 = reals("row_lease_1 row_lease_2")
T1 = reals("second_registered")[0]

TIMING_ASSUMPTIONS = [H > 0, V > H]
ALL_EXTENDED = {10: RowVerdict.EXTENDED, 11: RowVerdict.EXTENDED}


@dataclass(frozen=True)
class Question:
    """Run ``run`` over every path; ``claim`` of its result must hold under ``assumptions``."""

    run: Callable[[], Any]
    claim: Callable[[Any], object]
    assumptions: Sequence[object]


@dataclass(frozen=True)
class Variant:
    """The code a question is asked of: the core's class, and functions patched into the
    modules that call them (``(module, name, value)``) while the question runs."""

    core: type[GuardCore] = GuardCore
    patches: tuple[tuple[object, str, object], ...] = ()
    #: A weaker assumption about the world instead of a broken rule (see each proof).
    weaker_world: bool = False


THE_CODE = Variant()


@contextmanager
def patched(patches: Sequence[tuple[object, str, object]]) -> Iterator[None]:
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    try:
        for module, name, value in patches:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)


@dataclass(frozen=True)
class Outcome:
    name: str
    expected: str  # "proved" or "counterexample"
    got: str
    seconds: float
    detail: str = ""
    paths: int = 0

    @property
    def ok(self) -> bool:
        return self.expected == self.got


def check(
    name: str, question: Callable[[Any], Any], variant: Any, the_code: object = THE_CODE
) -> Outcome:
    """Ask ``question`` of ``variant``: the code (``the_code``) must be proved, a twin must
    be caught. ``maintainer_timing.py`` asks its questions the same way."""
    expected = "proved" if variant is the_code else "counterexample"
    with patched(variant.patches):
        asked = question(variant)
        verdict: Verdict = prove(asked.run, asked.claim, asked.assumptions)
    return Outcome(name, expected, verdict.got, verdict.seconds, verdict.detail, verdict.paths)


# -- driving the core as the runtime does ----------------------------------------------------


def next_wake(core: GuardCore, now: Num) -> object:
    """``core.next_wake``, with ``now`` if it takes one (it is gaining one)."""
    if inspect.signature(core.next_wake).parameters:
        return core.next_wake(now)
    return core.next_wake()


def register_two(
    core: GuardCore, *, sent: Num, now: Num, rows: Sequence[Num], batch_id: int = 1
) -> bool:
    """A claim of two jobs (10, 11 for batch 1; 20, 21 for batch 2), registered at local
    time ``now`` with wall = now + k."""
    jobs = [(10 * batch_id, 1), (10 * batch_id + 1, 1)]
    return core.register(
        batch_id, jobs, claim_sent=sent, now=now, wall_now=now + K, row_deadlines=rows
    )


def fresh(variant: Variant, *, max_job_duration: Num | None = None) -> GuardCore:
    return variant.core(Timing(V, H, max_job_duration))


def leased_at_claim(core: GuardCore) -> bool:
    """Register at ``T0`` a claim sent at ``T0`` whose rows the database leased at ``T0``
    (wall ``T0 + k + V``): the fence is ``T0 + V``."""
    row = T0 + K + V
    return register_two(core, sent=T0, now=T0, rows=[row, row])


def two_leases(core: GuardCore) -> bool:
    """Register batch 1 at ``T0`` and batch 2 at ``T1`` (``second_registered``, no earlier),
    each leased at its claim (fences ``T0 + V`` and ``T1 + V``). A renewal times out by the
    earliest lease it carries, so one abandoned, or failed, past batch 1's fence may still
    find batch 2 alive."""
    row1, row2 = T0 + K + V, T1 + K + V
    first = register_two(core, sent=T0, now=T0, rows=[row1, row1])
    return first and register_two(core, sent=T1, now=T1, rows=[row2, row2], batch_id=2)


def fence_of(core: GuardCore, batch_id: int = 1) -> Num:
    return core.batch(batch_id).lease_deadline


# -- (a) the fence at registration ---------------------------------------------------------


def registration_fence(variant: Variant) -> Question:
    """For any leases the rows came with: a registered batch's fence is no later than
    ``claim_sent + V`` nor than any row's lease translated to local time, and lies ahead;
    a batch that is not registered had no such fence ahead."""

    def run() -> tuple[bool, Num | None]:
        core = fresh(variant)
        ok = register_two(core, sent=SENT, now=T0, rows=[ROW1, ROW2])
        return ok, fence_of(core) if ok else None

    def claim(result: tuple[bool, Num | None]) -> object:
        ok, fence = result
        if not ok:
            return smallest(SENT + V, ROW1 - K, ROW2 - K) <= T0
        return all_of(fence <= SENT + V, fence + K <= ROW1, fence + K <= ROW2, fence > T0)

    return Question(run, claim, [*TIMING_ASSUMPTIONS, SENT <= T0])


def ignores_rows(
    claim_sent: float, v: float, local_now: float, wall_now: float, rows: object
) -> float:
    return claim_sent + v


def delayed_claim(variant: Variant) -> Question:
    """§1: however long the claim waited for its locks, the batch arrives registered with a
    live fence, if its rows were locked within ``spread`` of each other and the two trips
    took less than ``V - spread``. The runtime passes ``claim_sent`` plus the smallest lock
    wait (``trioqueue/_runtime/guard.py``). Weaker world: leases counted from the
    statement's start (the rule before §1's "lease from the lock") deliver a dead lease."""
    wait1, wait2 = LATER, LATER2
    start = SENT + K + D_OUT  # the statement starts on the database (wall clock)
    leased_from = (start, start) if variant.weaker_world else (start + wait1, start + wait2)
    arrives = SENT + D_OUT + largest(wait1, wait2) + D_BACK
    spread = largest(wait1, wait2) - smallest(wait1, wait2)

    def run() -> tuple[bool, Num | None]:
        core = fresh(variant)
        rows = [leased_from[0] + V, leased_from[1] + V]
        ok = register_two(core, sent=SENT + smallest(wait1, wait2), now=arrives, rows=rows)
        return ok, fence_of(core) if ok else None

    def claim(result: tuple[bool, Num | None]) -> object:
        ok, fence = result
        return ok and term(fence > arrives)

    delays = [D_OUT >= 0, D_BACK >= 0, wait1 >= 0, wait2 >= 0]
    return Question(run, claim, [*TIMING_ASSUMPTIONS, *delays, D_OUT + D_BACK + spread < V])


# -- (a) the fence after a renewal ---------------------------------------------------------


def renewal_fence(variant: Variant) -> Question:
    """After a renewal sent at ``renewal_sent`` and answered at ``answer_arrives``, the
    fence is no later than ``u + V`` for any time ``u`` in between at which the database
    may have run the renewal (and set the row's lease to its ``now() + V``)."""

    def run() -> Num | None:
        core = fresh(variant)
        if not leased_at_claim(core):
            return None
        renewal = core.next_renewal(SENT)
        if renewal is None:
            return None
        core.answered(renewal.token, ARRIVE, ALL_EXTENDED)
        return fence_of(core)

    def claim(fence: Num | None) -> object:
        return fence is None or term(fence <= U + V)

    order = [T0 <= SENT, SENT <= U, U <= ARRIVE]
    return Question(run, claim, [*TIMING_ASSUMPTIONS, *order])


def from_the_answer(previous: float, renewal_sent: float, v: float) -> float:
    return max(previous, ARRIVE + v)


def a_second_late(previous: float, renewal_sent: float, v: float) -> float:
    return max(previous, renewal_sent + v + 1)


# -- (c) failed renewals -----------------------------------------------------------------------


def failed_once(variant: Variant, *, abandoned: bool) -> GuardCore | None:
    """Register two batches (:func:`two_leases`), send the first renewal at
    ``renewal_sent``, and have it fail at ``later`` (or be abandoned by a poll then)."""
    core = fresh(variant)
    if not two_leases(core):
        return None
    renewal = core.next_renewal(SENT)
    if renewal is None:
        return None
    if abandoned:
        if core.poll(LATER).abandoned is None:
            return None
    else:
        core.failed(renewal.token, LATER)
    return core


def retry_pace(variant: Variant, *, abandoned: bool = False) -> Question:
    """A failed renewal is retried at least ``min(H, 0.25 s)`` and at most ``H`` later, so a
    lease sees finitely many renewal statements however they fail; and it is retried before
    a batch's fence while more than ``2 × 0.25 s`` of its lease is left. ``abandoned``: the
    same for a renewal the guard abandoned, which counts as a failed one."""

    def run() -> tuple[list[Num], object] | None:
        core = failed_once(variant, abandoned=abandoned)
        if core is None:
            return None
        return [fence_of(core, 1), fence_of(core, 2)], next_wake(core, LATER)

    def claim(result: tuple[list[Num], object] | None) -> object:
        if result is None:
            return True
        fences, wake = result
        if wake == math.inf:
            # No wake: every lease is lost, or would be by its retry, which comes at least
            # as late as the fence only with at most 0.25 s of lease left (§10, refinement 16).
            return all_of(*(fence <= LATER + MIN_RETRY for fence in fences))
        delay = value_of(wake) - value_of(LATER)
        paced = all_of(delay >= value_of(smallest(H, MIN_RETRY)), delay <= value_of(H))
        in_time = [implies(fence - LATER > 2 * MIN_RETRY, wake < fence) for fence in fences]
        return all_of(paced, *in_time)

    return Question(run, claim, [*TIMING_ASSUMPTIONS, T0 <= T1, T1 <= SENT, SENT <= LATER])


def without_the_floor(heartbeat_interval: float, remaining: float) -> float:
    return min(heartbeat_interval, remaining / 2.0)


def at_the_beat(heartbeat_interval: float, remaining: float) -> float:
    return heartbeat_interval


# -- (f) the in-flight wait and the abandonment ----------------------------------------------


def in_flight_wait(variant: Variant) -> Question:
    """While a renewal carrying the batch is in flight, its give-up time, the fence time and
    the scope deadline are at most 0.25 s past the batch's lease deadline (§3, §6); the
    statement's timeout is at least 0.25 s."""

    def run() -> tuple[Num, Renewal, object, object] | None:
        core = fresh(variant)
        if not leased_at_claim(core):
            return None
        renewal = core.next_renewal(SENT)
        if renewal is None:
            return None
        batch = core.batch(1)
        return fence_of(core), renewal, core.fence_time(batch), core.scope_deadline(1)

    def claim(result: tuple[Num, Renewal, Any, Any] | None) -> object:
        if result is None:
            return True
        fence, renewal, fires, scope = result
        late = fence + MIN_RETRY
        give_up = renewal.give_up_at
        return all_of(give_up <= late, fires <= late, scope <= late, give_up >= SENT + MIN_RETRY)

    return Question(run, claim, [*TIMING_ASSUMPTIONS, T0 <= SENT])


def waits_a_whole_lease(visibility_timeout: float, earliest_remaining: float) -> float:
    return max(MIN_RETRY, visibility_timeout)


def abandonment_time(variant: Variant) -> Question:
    """A poll abandons the current renewal exactly when it is at least ``GRACE`` past the
    renewal's give-up time (§6): never earlier, and no later than the first poll then."""

    def run() -> tuple[Renewal, bool] | None:
        core = fresh(variant)
        if not leased_at_claim(core):
            return None
        renewal = core.next_renewal(SENT)
        if renewal is None:
            return None
        return renewal, core.poll(LATER).abandoned == renewal.token

    def claim(result: tuple[Renewal, bool] | None) -> object:
        if result is None:
            return True
        renewal, abandoned = result
        due = renewal.give_up_at + GRACE <= LATER
        return term(due) if abandoned else z3_not(due)

    return Question(run, claim, [*TIMING_ASSUMPTIONS, T0 <= SENT, SENT <= LATER])


def z3_not(value: object) -> object:
    return z3.Not(term(value))


# -- I5, I6: one abandoned call at a time, and late answers change nothing --------------------


def abandoned_and_resent(variant: Variant) -> tuple[GuardCore, Renewal, Renewal] | None:
    """Two batches (:func:`two_leases`); the first renewal (sent at ``renewal_sent``) is
    abandoned by a poll at ``later``; a second one goes at ``second_sent``."""
    core = fresh(variant)
    if not two_leases(core):
        return None
    first = core.next_renewal(SENT)
    if first is None or core.poll(LATER).abandoned != first.token:
        return None
    second = core.next_renewal(SENT2)
    if second is None:
        return None
    return core, first, second


def one_abandoned_at_a_time(variant: Variant) -> Question:
    """I5: while an abandoned renewal is still out, a poll at any later time never abandons
    the next one: the core still counts the first as abandoned and the second as current,
    the two calls really out."""

    def run() -> bool | None:
        sent = abandoned_and_resent(variant)
        if sent is None:
            return None
        core, first, second = sent
        core.poll(LATER2)
        abandoned, current = core.abandoned, core.current
        return (
            abandoned is not None
            and abandoned.token == first.token
            and current is not None
            and current.token == second.token
        )

    def claim(kept: bool | None) -> object:
        return kept is not False

    order = [T0 <= T1, T1 <= SENT, SENT <= LATER, LATER <= SENT2, SENT2 <= LATER2]
    return Question(run, claim, [*TIMING_ASSUMPTIONS, *order])


class AbandonsTwice(GuardCore):
    """Abandons the current renewal even while another one is abandoned."""

    def poll(self, now: float) -> Effects:
        abandoned, self.abandoned = self.abandoned, None
        effects = super().poll(now)
        if effects.abandoned is None:
            self.abandoned = abandoned
        return effects


def late_answer(variant: Variant) -> Question:
    """I6: the abandoned renewal's answer, whenever it comes and whatever it says, changes no
    lease deadline, stops nothing and cancels nothing; the current renewal stays current
    unless it is itself past its abandon time (the exit frees the slot, then polls)."""

    def run() -> tuple[object, object, Effects, Renewal, Renewal | None] | None:
        sent = abandoned_and_resent(variant)
        if sent is None:
            return None
        core, first, second = sent
        before = [fence_of(core, 1), fence_of(core, 2)]
        verdicts = dict.fromkeys((10, 20), RowVerdict.CANCEL_REQUESTED)
        verdicts |= dict.fromkeys((11, 21), RowVerdict.RECLAIMED)
        effects = core.answered(first.token, LATER2, verdicts)
        return before, [fence_of(core, 1), fence_of(core, 2)], effects, second, core.current

    def claim(result: tuple[Any, Any, Effects, Renewal, Renewal | None] | None) -> object:
        if result is None:
            return True
        before, after, effects, second, current = result
        quiet = not effects.stops and not effects.cancels
        same = all_of(*(a == b for a, b in zip(after, before, strict=True)))
        if current is None or current.token != second.token:
            return quiet and all_of(second.abandon_at <= LATER2, same)
        return quiet and same

    order = [T0 <= T1, T1 <= SENT, SENT <= LATER, LATER <= SENT2, SENT2 <= LATER2]
    return Question(run, claim, [*TIMING_ASSUMPTIONS, *order])


class AppliesLateAnswers(GuardCore):
    """Takes any renewal's answer for the current one's."""

    def answered(self, token: int, now: float, verdicts: Mapping[int, RowVerdict]) -> Effects:
        current = self.current
        return super().answered(token if current is None else current.token, now, verdicts)


# -- S1: the in-flight rescue ----------------------------------------------------------------


def in_flight_rescue(variant: Variant) -> Question:
    """§3: an answer that extends the batch and arrives by the renewal's give-up time is in
    time, even after the old lease ran out: expiry is judged while the renewal still counts
    as in flight. The batch is not stopped and its fence moves to ``renewal_sent + V``."""

    def run() -> tuple[Renewal, Num, object] | None:
        core = fresh(variant)
        if not leased_at_claim(core):
            return None
        renewal = core.next_renewal(SENT)
        if renewal is None:
            return None
        core.answered(renewal.token, ARRIVE, ALL_EXTENDED)
        return renewal, fence_of(core), core.batch_stop(1, ARRIVE)

    def claim(result: tuple[Renewal, Num, object] | None) -> object:
        if result is None:
            return True
        renewal, fence, stop = result
        # Strictly before the give-up time, and before the new lease itself ran out.
        in_time = all_of(renewal.give_up_at > ARRIVE, ARRIVE < SENT + V)
        return implies(in_time, stop is None and term(fence >= SENT + V))

    return Question(run, claim, [*TIMING_ASSUMPTIONS, T0 <= SENT, SENT <= ARRIVE])


class JudgesAfterClearing(GuardCore):
    """Judges expiry at an answer as if its renewal were no longer in flight."""

    def answered(self, token: int, now: float, verdicts: Mapping[int, RowVerdict]) -> Effects:
        current = self.current
        if current is not None and current.token == token:
            self.current = None
            for batch_id in current.batch_ids:
                self.batch_stop(batch_id, now)
            self.current = current
        return super().answered(token, now, verdicts)


# -- gone needs two sightings ------------------------------------------------------------------


def gone_twice(variant: Variant) -> Question:
    """§2: a first ``gone`` stops nothing and the confirming renewal is due within 0.25 s;
    the second consecutive ``gone`` stops that job (and only it)."""
    gone = {10: RowVerdict.GONE, 11: RowVerdict.EXTENDED}

    def run() -> tuple[Effects, object, Effects | None] | None:
        core = fresh(variant)
        if not leased_at_claim(core):
            return None
        first = core.next_renewal(SENT)
        if first is None:
            return None
        seen = core.answered(first.token, ARRIVE, gone)
        wake = next_wake(core, ARRIVE)
        if wake == math.inf:
            return seen, wake, None
        second = core.next_renewal(wake)
        if second is None:
            return seen, wake, None
        return seen, wake, core.answered(second.token, LATER, gone)

    def claim(result: tuple[Effects, Any, Effects | None] | None) -> object:
        if result is None:
            return True
        seen, wake, confirmed = result
        if seen.stops:
            return False  # the first sighting stopped a job
        if wake == math.inf:
            # Only a lost lease ends the renewals: lost by now, or by the confirming
            # renewal's due time, 0.25 s on (§10, refinement 16).
            return term(ARRIVE + MIN_RETRY >= T0 + V)
        soon = term(wake <= ARRIVE + MIN_RETRY)
        if confirmed is None:
            return soon
        # The confirming answer stops job 10, and only it, unless the lease was lost by then.
        stopped = confirmed.stops == [(1, 10, StopReason.GONE)]
        return all_of(soon, implies(wake <= LATER, stopped or term(LATER >= T0 + V)))

    order = [T0 <= SENT, SENT <= ARRIVE, ARRIVE <= LATER]
    return Question(run, claim, [*TIMING_ASSUMPTIONS, *order])


def gone_at_once() -> Mapping[RowVerdict, VerdictRule]:
    """The verdict table with ``gone`` believed on its first sighting."""
    return {**VERDICT_RULES, RowVerdict.GONE: VerdictRule(renews=False, stops=StopReason.GONE)}


# -- S3: reclaimed over an earlier cancel -------------------------------------------------------


def reclaimed_over_cancel(variant: Variant) -> Question:
    """§10: ``reclaimed`` after an earlier ``cancel_requested`` of the same job overrides
    the cancel: the job's stop becomes RECLAIMED (its outcome "unavailable": nothing is
    written) and is delivered while the batch is not stopped."""

    def run() -> tuple[object, Effects, object] | None:
        core = fresh(variant)
        if not leased_at_claim(core):
            return None
        first = core.next_renewal(SENT)
        if first is None:
            return None
        cancel = {10: RowVerdict.CANCEL_REQUESTED, 11: RowVerdict.EXTENDED}
        core.answered(first.token, ARRIVE, cancel)
        second = core.next_renewal(SENT2)
        if second is None:
            return None
        reclaimed = {10: RowVerdict.RECLAIMED, 11: RowVerdict.EXTENDED}
        effects = core.answered(second.token, LATER, reclaimed)
        return core.batch(1).stop, effects, core.job(1, 10).stop

    def claim(result: tuple[Any, Effects, Any] | None) -> object:
        if result is None:
            return True
        batch_stop, effects, job_stop = result
        delivered = batch_stop is not None or effects.stops == [(1, 10, StopReason.RECLAIMED)]
        lost = term(LATER >= SENT + V)  # a lost lease takes no verdicts at all
        return (job_stop is StopReason.RECLAIMED and delivered) or lost

    order = [T0 <= SENT, SENT <= ARRIVE, ARRIVE <= SENT2, SENT2 <= LATER]
    return Question(run, claim, [*TIMING_ASSUMPTIONS, *order])


class CancelStands(GuardCore):
    """Keeps an earlier cancel as a job's stop when its row is reclaimed."""

    def answered(self, token: int, now: float, verdicts: Mapping[int, RowVerdict]) -> Effects:
        cancelled = [
            (batch_id, job.job_id)
            for batch_id in self.batch_ids()
            for job in self.batch(batch_id).jobs.values()
            if job.stop is StopReason.CANCELLED
        ]
        effects = super().answered(token, now, verdicts)
        for batch_id, job_id in cancelled:
            self.job(batch_id, job_id).stop = StopReason.CANCELLED
        return effects


# -- (d) I4: max_job_duration ----------------------------------------------------------------


def duration_deadline(variant: Variant) -> Question:
    """I4: the scope that holds the claim hooks and the handler never has a deadline later
    than ``registration + D``, at registration, with a renewal in flight and after its
    answer; and at ``registration + D`` the batch is stopped."""

    def run() -> tuple[object, ...] | None:
        core = fresh(variant, max_job_duration=D)
        if not leased_at_claim(core):
            return None
        deadlines = [core.scope_deadline(1)]
        renewal = core.next_renewal(SENT)
        if renewal is not None:
            deadlines.append(core.scope_deadline(1))
            core.answered(renewal.token, ARRIVE, ALL_EXTENDED)
            deadlines.append(core.scope_deadline(1))
        return (*deadlines, core.batch_stop(1, T0 + D))

    def claim(result: tuple[Any, ...] | None) -> object:
        if result is None:
            return True
        *deadlines, stop = result
        return all_of(*(deadline <= T0 + D for deadline in deadlines), stop is not None)

    order = [T0 <= SENT, SENT <= ARRIVE, ARRIVE <= T0 + D]
    return Question(run, claim, [*TIMING_ASSUMPTIONS, D > 0, *order])


class DurationLate(GuardCore):
    """Starts max_job_duration a second after registration."""

    def register(self, batch_id: int, *args: Any, **kwargs: Any) -> bool:
        ok = super().register(batch_id, *args, **kwargs)
        if ok:
            self.batch(batch_id).duration_deadline += 1
        return ok


def duration_outcome(variant: Variant) -> Question:
    """I4, §4: a batch stopped by ``max_job_duration`` (the first deadline to pass, at any
    time) comes to a charged, retryable failure while attempts remain, and a final one on
    the last attempt, with the message of §10 refinement 15."""

    def run() -> tuple[object, object, object] | None:
        core = fresh(variant, max_job_duration=D)
        if not leased_at_claim(core):
            return None
        stop = core.batch_stop(1, LATER)
        if stop is not StopReason.DURATION:
            return stop, None, None

        def ended(attempt: int, no_connection: str | None = None) -> object:
            return outcome.decide(
                job_stop=None,
                batch_stop=stop,
                error=None,
                attempt=attempt,
                max_attempts=3,
                max_job_duration=2.5,
                no_connection=no_connection,
            )

        return stop, (ended(1), ended(3)), ended(1, no_connection="refused")

    def claim(result: tuple[Any, Any, Any] | None) -> object:
        if result is None:
            return True
        stop, attempts, released = result
        if attempts is None:
            return stop is None and term(LATER < T0 + D)  # D had not passed yet
        first, last = attempts
        message = "claim hooks and handler ran past max_job_duration of 2.5s"
        return (
            first.kind is OutcomeKind.RETRY
            and last.kind is OutcomeKind.FAILED
            and first.message == last.message == message
            # Without its database connection the attempt is released uncharged (§4).
            and released.kind is OutcomeKind.RELEASE
        )

    return Question(run, claim, [*TIMING_ASSUMPTIONS, D > 0, T0 <= LATER, D < V])


def fails_for_good(**facts: Any) -> object:
    """``decide``, with an attempt stopped by max_job_duration failed for good at once."""
    if facts["batch_stop"] is StopReason.DURATION:
        return outcome.Outcome(OutcomeKind.FAILED, outcome.duration_message(2.5))
    return DECIDE(**facts)


DECIDE = outcome.decide


# -- (b) §7, I3: the database-loss window ------------------------------------------------------


def database_loss(variant: Variant) -> Question:
    """§7, I3: the last renewal that ran was sent at ``s`` (it ran at ``s + d_out``, before
    the loss, and was answered within a beat); the next one, sent when the guard says it is
    due, reached the database after the loss and failed. With a renewal in flight or after
    its failure, the batch's scope stops within ``[L + V - H - d_out2, L + V + 0.25]``."""
    d_out2 = D_OUT2  # the next renewal's trip to the database

    def run() -> tuple[Num, list[object]] | None:
        core = fresh(variant)
        if not leased_at_claim(core):
            return None
        last = core.next_renewal(SENT)
        if last is None:
            return None
        core.answered(last.token, ARRIVE, ALL_EXTENDED)
        wake = next_wake(core, ARRIVE)
        if wake == math.inf:
            return None
        sent = largest(wake, ARRIVE)  # the guard sends when due, once the answer is in
        lost = core.next_renewal(sent)
        if lost is None:
            return None
        stops = [core.scope_deadline(1)]
        core.failed(lost.token, LATER)
        return sent, [*stops, core.scope_deadline(1)]

    def claim(result: tuple[Num, list[Any]] | None) -> object:
        if result is None:
            return True
        sent, stops = result
        missed = sent + d_out2 >= LOSS  # the next renewal reached the database after L
        window = [all_of(LOSS + V - H - d_out2 <= s, s <= LOSS + V + GRACE) for s in stops]
        return implies(missed, all_of(*window))

    assumptions = [
        *TIMING_ASSUMPTIONS,
        T0 <= SENT,
        D_OUT >= 0,
        d_out2 >= 0,
        SENT + D_OUT < LOSS,  # the last renewal ran before the loss
        SENT + D_OUT <= ARRIVE,
        ARRIVE < SENT + H,  # and was answered within a beat
        ARRIVE <= LATER,
    ]
    return Question(run, claim, assumptions)


# -- every proof and its twins -----------------------------------------------------------------


@dataclass(frozen=True)
class Proof:
    name: str
    question: Callable[[Variant], Question]
    #: (what the twin breaks, the variant): each must come back with a counterexample.
    twins: list[tuple[str, Variant]] = field(default_factory=list)


def _patch(module: object, name: str, value: object) -> Variant:
    return Variant(patches=((module, name, value),))


PROOF_LIST: list[Proof] = [
    Proof(
        "(a) registration: the fence is within every row's lease and claim_sent + V",
        registration_fence,
        [("a row's own lease ignored", _patch(guard_rules, "initial_deadline", ignores_rows))],
    ),
    Proof(
        "(e) a claim delayed by its locks still arrives with a live fence",
        delayed_claim,
        [("leases counted from the statement's start", Variant(weaker_world=True))],
    ),
    Proof(
        "(a) renewal: the fence is within u + V for any database time u of the renewal",
        renewal_fence,
        [
            (
                "fence from the answer's arrival",
                _patch(guard_rules, "advanced_deadline", from_the_answer),
            ),
            (
                "fence a second after sent + V",
                _patch(guard_rules, "advanced_deadline", a_second_late),
            ),
        ],
    ),
    Proof(
        "(c) a failed renewal is retried in [min(H, 0.25), H], before the fence",
        retry_pace,
        [
            (
                "retried without the 0.25 s floor",
                _patch(guard_rules, "retry_delay", without_the_floor),
            ),
            ("retried at the beat", _patch(guard_rules, "retry_delay", at_the_beat)),
        ],
    ),
    Proof(
        "(c) an abandoned renewal is retried as a failed one",
        lambda variant: retry_pace(variant, abandoned=True),
        [
            (
                "retried without the 0.25 s floor",
                _patch(guard_rules, "retry_delay", without_the_floor),
            )
        ],
    ),
    Proof(
        "(f) a renewal in flight holds the fence at most 0.25 s past the lease",
        in_flight_wait,
        [("timeout of a whole lease", _patch(guard_rules, "renewal_timeout", waits_a_whole_lease))],
    ),
    Proof(
        "(f) a poll abandons a renewal exactly from give-up + GRACE on",
        abandonment_time,
        [("no grace", _patch(guard_rules, "GRACE", 0.0))],
    ),
    Proof(
        "I5: one renewal abandoned at a time",
        one_abandoned_at_a_time,
        [("a second renewal abandoned", Variant(core=AbandonsTwice))],
    ),
    Proof(
        "I6: a late answer of an abandoned renewal changes nothing",
        late_answer,
        [("a superseded token's answer applied", Variant(core=AppliesLateAnswers))],
    ),
    Proof(
        "S1 (§3): an answer by the give-up time rescues a lease past its fence",
        in_flight_rescue,
        [("expiry judged after the slot is cleared", Variant(core=JudgesAfterClearing))],
    ),
    Proof(
        "§2: gone is believed on the second sighting, confirmed within 0.25 s",
        gone_twice,
        [("gone believed at once", _patch(guard_rules, "VERDICT_RULES", gone_at_once()))],
    ),
    Proof(
        "S3 (§10): reclaimed overrides an earlier cancel of the job",
        reclaimed_over_cancel,
        [("the cancel stands", Variant(core=CancelStands))],
    ),
    Proof(
        "(d) I4: the scope never outlives registration + D",
        duration_deadline,
        [("D one second late", Variant(core=DurationLate))],
    ),
    Proof(
        "(d) I4: max_job_duration is a retryable, charged failure",
        duration_outcome,
        [("failed for good at once", _patch(outcome, "decide", fails_for_good))],
    ),
    Proof(
        "(b) §7, I3: the scope stops within [L + V - H - d_out, L + V + 0.25]",
        database_loss,
        [
            (
                "fence from the answer's arrival",
                _patch(guard_rules, "advanced_deadline", from_the_answer),
            )
        ],
    ),
]


def run_all(proofs: Sequence[Any] = (), the_code: object = THE_CODE) -> Iterator[Outcome]:
    """Each proof of ``proofs`` (by default :data:`PROOF_LIST`) asked of the code, then of
    each of its twins."""
    for proof in proofs or PROOF_LIST:
        yield check(proof.name, proof.question, the_code, the_code)
        for what, variant in proof.twins:
            yield check(f"  twin: {what}", proof.question, variant, the_code)


def report(outcomes: Iterable[Outcome]) -> int:
    """Print one line per outcome; the number that went otherwise than expected."""
    began = time.perf_counter()
    failed = 0
    for result in outcomes:
        mark = "ok  " if result.ok else "FAIL"
        failed += not result.ok
        print(
            f"{mark} {result.got:<15} {result.paths:4} paths {result.seconds * 1000:8.1f} ms  {result.name}"
        )
        if not result.ok:
            print(f"     expected {result.expected}: {result.detail}")
    print(f"{time.perf_counter() - began:.1f} s")
    return failed


def main() -> int:
    return report(run_all())


if __name__ == "__main__":
    raise SystemExit(main())
