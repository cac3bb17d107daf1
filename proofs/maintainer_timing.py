"""Timing bounds of the maintainer lease, proved with z3 about the core's own code.

The same method as ``timing.py`` (which proves the guard's): the very methods of
``trioqueue._core.maintainer.MaintainerCore`` that run in production (``call``,
``claimed``, ``renewed``, ``failed``, ``holding``, ``wake_at``, and through them
``trioqueue._core.timing``) run on symbolic times (:mod:`symbolic`), every feasible path is
explored, and z3 looks for values that break the claim. Each proof has a negative twin, a
core with one rule broken, which must come back with a counterexample.

What is proved is what docs/protocol.rst §15 ("The maintainer lease") promises a porter:

- M1: holding is judged on the local clock and never outlives the store's lease: after a
  claim, and after a renewal, the pool holds at local time ``t`` only if ``t < u + V``
  for the database time ``u`` (in local time) at which the store set its lease, whatever
  the round trips took. So one pool's batches cannot overlap another holder's lease.
- M2: a fired fence stays fired: a renewal answered at or after the fence, even
  "extended", leaves the pool not holding (it must claim anew).
- M3: a candidate the store refused asks again exactly one cadence ``H`` after its claim
  was sent (or at once if the answer came later): so a dead holder's lease, which lapses
  ``V`` after its last renewal, is taken over by a claim sent within ``H`` of the lapse.
- M4: a failed renewal is retried before the fence, within ``[min(H, 0.25), H]``, while
  more than 0.5 s of the fence is left.

Time is the worker's local clock; the database ran a statement at a local time ``u``
between its send and its answer (synchronised clocks, docs/protocol.rst §8).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import timing
from symbolic import Num, all_of, implies, reals
from timing import Outcome

from trioqueue._core import maintainer
from trioqueue._core.maintainer import Change, LeaseCall, MaintainerCore
from trioqueue._core.timing import MIN_RETRY

V, H, INTERVAL = reals("V H interval")
SENT, U, ARRIVE = reals("claim_sent db_ran_claim claim_answered")
SENT2, U2, ARRIVE2 = reals("renewal_sent db_ran_renewal renewal_answered")
LATER = reals("later")[0]

ASSUMPTIONS = [H > 0, V > H, INTERVAL > 0]
CLAIM_ORDER = [SENT <= U, U <= ARRIVE]
RENEWAL_ORDER = [ARRIVE <= SENT2, SENT + H <= SENT2, SENT2 <= U2, U2 <= ARRIVE2]


@dataclass(frozen=True)
class Question:
    run: Callable[[], Any]
    claim: Callable[[Any], object]
    assumptions: Sequence[object]


@dataclass(frozen=True)
class Variant:
    """The maintainer core a question is asked of, and functions patched meanwhile."""

    core: type[MaintainerCore] = MaintainerCore
    patches: tuple[tuple[object, str, object], ...] = ()


THE_CODE = Variant()


def fresh(variant: Variant) -> MaintainerCore:
    return variant.core(V, H, INTERVAL)


def claimed_at(core: MaintainerCore) -> bool:
    """The first claim, sent at ``claim_sent`` and granted (fence seq 1) at its answer."""
    call = core.call(SENT)
    if call is None or not call.is_claim:
        return False
    core.claimed(call, 1, ARRIVE)
    return core.holding(ARRIVE)


# -- M1: holding never outlives the store's lease -----------------------------------------


def fence_after_claim(variant: Variant) -> Question:
    """M1 (claim): at any later local time, holding implies the store's lease (set by the
    claim at ``u``: ``u + V``) has not run out."""

    def run() -> bool:
        core = fresh(variant)
        if not claimed_at(core):
            return False
        return core.holding(LATER)

    def claim(holding: bool) -> object:
        return implies(holding, LATER < U + V)

    return Question(run, claim, [*ASSUMPTIONS, *CLAIM_ORDER, ARRIVE <= LATER])


def fence_after_renewal(variant: Variant) -> Question:
    """M1 (renewal): after a renewal the store answered "extended", holding at a later
    local time implies the store's lease (``u2 + V``, set by the renewal) has not run out."""

    def run() -> bool:
        core = fresh(variant)
        if not claimed_at(core):
            return False
        call = core.call(SENT2)
        if call is None or call.is_claim:
            return False
        core.renewed(call, True, ARRIVE2)
        return core.holding(LATER)

    def claim(holding: bool) -> object:
        return implies(holding, LATER < U2 + V)

    return Question(run, claim, [*ASSUMPTIONS, *CLAIM_ORDER, *RENEWAL_ORDER, ARRIVE2 <= LATER])


class FenceFromTheAnswer(MaintainerCore):
    """Twin: the fence counted from when the answer arrived, not from the send."""

    def claimed(self, call: LeaseCall, seq: int | None, now: float) -> Change:
        change = super().claimed(call, seq, now)
        if self.seq is not None:
            self.fence = now + self.lease
        return change

    def renewed(self, call: LeaseCall, extended: bool, now: float) -> Change:
        change = super().renewed(call, extended, now)
        if self.seq is not None:
            self.fence = now + self.lease
        return change


# -- M2: a fired fence stays fired ---------------------------------------------------------


def fired_fence(variant: Variant) -> Question:
    """M2: a renewal answered "extended" at or after the fence leaves the pool not
    holding, and says the holding was lost."""

    def run() -> tuple[Change, bool] | None:
        core = fresh(variant)
        if not claimed_at(core):
            return None
        call = core.call(SENT2)
        if call is None or call.is_claim:
            return None
        fence = core.fence
        if fence > ARRIVE2:  # only answers at or after the fence are asked about
            return None
        change = core.renewed(call, True, ARRIVE2)
        return change, core.holding(ARRIVE2)

    def claim(result: tuple[Change, bool] | None) -> object:
        return result is None or (result[0] is Change.LOST and not result[1])

    return Question(run, claim, [*ASSUMPTIONS, *CLAIM_ORDER, *RENEWAL_ORDER])


class RevivedByLateAnswers(MaintainerCore):
    """Twin: an "extended" answer after the fence revives the holding."""

    def renewed(self, call: LeaseCall, extended: bool, now: float) -> Change:
        self._answered(call)
        if self.seq != call.seq or not extended:
            return super().renewed(call, extended, now)
        self.fence = max(self.fence, call.sent + self.lease)
        self._next_call = call.sent + self.cadence
        return Change.NONE


# -- M3: a refused candidate asks again one cadence later ----------------------------------


def refused_claim(variant: Variant) -> Question:
    """M3: after a claim the store refused (answered within a cadence), the next claim is
    due exactly one cadence after the refused one was sent: none is sent before, one then."""

    def refused() -> MaintainerCore | None:
        core = fresh(variant)
        call = core.call(SENT)
        if call is None:
            return None
        core.claimed(call, None, ARRIVE)
        return core

    def run() -> tuple[Num, bool, bool] | None:
        early, on_time = refused(), refused()
        if early is None or on_time is None:
            return None
        due = on_time.wake_at()
        return due, early.call(LATER) is not None, on_time.call(SENT + H) is not None

    def claim(result: tuple[Num, bool, bool] | None) -> object:
        if result is None:
            return False
        due, sent_early, sent_on_time = result
        return all_of(due == SENT + H, not sent_early, sent_on_time)

    order = [*CLAIM_ORDER, ARRIVE <= SENT + H, LATER < SENT + H]
    return Question(run, claim, [*ASSUMPTIONS, *order])


class WaitsALease(MaintainerCore):
    """Twin: a refused candidate waits a whole lease before asking again."""

    def claimed(self, call: LeaseCall, seq: int | None, now: float) -> Change:
        change = super().claimed(call, seq, now)
        if seq is None:
            self._next_call = call.sent + self.lease
        return change


# -- M4: a failed renewal is retried before the fence ---------------------------------------


def failed_renewal(variant: Variant) -> Question:
    """M4: a renewal that failed at ``later``, with more than 0.5 s of the fence left, is
    retried within ``[min(H, 0.25), H]`` after the failure, and before the fence."""

    def run() -> tuple[Num, Num] | None:
        core = fresh(variant)
        if not claimed_at(core):
            return None
        call = core.call(SENT2)
        if call is None or call.is_claim:
            return None
        core.failed(call, LATER)
        return core.wake_at(), core.fence

    def claim(result: tuple[Num, Num] | None) -> object:
        if result is None:
            return False
        due, fence = result
        return all_of(
            due - LATER <= H,
            implies(H >= MIN_RETRY, due - LATER >= MIN_RETRY),
            implies(H < MIN_RETRY, due - LATER >= H),
            due < fence,
        )

    left = SENT + V - LATER  # the fence is the claim's send + V
    order = [*CLAIM_ORDER, ARRIVE <= SENT2, SENT + H <= SENT2, SENT2 <= LATER]
    return Question(run, claim, [*ASSUMPTIONS, *order, left > 2 * MIN_RETRY])


def at_the_beat(heartbeat_interval: float, remaining: float) -> float:
    return heartbeat_interval


# -- every proof and its twins --------------------------------------------------------------


@dataclass(frozen=True)
class Proof:
    name: str
    question: Callable[[Variant], Question]
    twins: list[tuple[str, Variant]] = field(default_factory=list)


PROOF_LIST: list[Proof] = [
    Proof(
        "M1 (§15): after a claim, holding never outlives the store's lease",
        fence_after_claim,
        [("fence from the answer's arrival", Variant(core=FenceFromTheAnswer))],
    ),
    Proof(
        "M1 (§15): after a renewal, holding never outlives the store's lease",
        fence_after_renewal,
        [("fence from the answer's arrival", Variant(core=FenceFromTheAnswer))],
    ),
    Proof(
        "M2 (§15): a fired fence stays fired, whatever a late answer says",
        fired_fence,
        [("a late 'extended' revives the holding", Variant(core=RevivedByLateAnswers))],
    ),
    Proof(
        "M3 (§15): a refused candidate claims again one cadence after its claim was sent",
        refused_claim,
        [("waits a whole lease", Variant(core=WaitsALease))],
    ),
    Proof(
        "M4 (§15): a failed renewal is retried in [min(H, 0.25), H], before the fence",
        failed_renewal,
        [("retried at the beat", Variant(patches=((maintainer, "retry_delay", at_the_beat),)))],
    ),
]


def check(name: str, question: Callable[[Variant], Question], variant: Variant) -> Outcome:
    return timing.check(name, question, variant, THE_CODE)


def run_all() -> Iterator[Outcome]:
    return timing.run_all(PROOF_LIST, THE_CODE)


if __name__ == "__main__":
    raise SystemExit(timing.report(run_all()))
