"""Timing bounds of the lease fence, proved with z3 for every parameter value.

Each proof states its assumptions as constraints, then asks z3 for a counterexample to its
claim: ``unsat`` (none exists) proves the claim for all real values that meet the
assumptions. Each proof has a *negative twin*, the same question asked of a wrong rule,
which must come back ``sat`` with a counterexample: that shows the encoding is strong
enough to catch the mistake the rule guards against.

The encodings are the formulas of ``trioqueue._core.fence`` (docs/protocol.rst, "§3 The
lease fence"); :func:`encoding_matches_the_core` evaluates both on sampled values, so that
the proofs are about the code, not about a copy that could drift from it.

Time is split into the worker's local clock and the database's wall clock, with
``wall = local + k`` for a fixed offset ``k`` ("synchronised clocks": the offset is known
nowhere, but constant). Every delay is a real number >= 0.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import z3

from trioqueue._core.fence import advanced_deadline, initial_deadline
from trioqueue._core.timing import GRACE, MIN_RETRY, retry_delay


def _min(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a <= b, a, b)


def _max(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a >= b, a, b)


@dataclass(frozen=True)
class Outcome:
    name: str
    expected: str  # "proved" or "counterexample"
    got: str
    seconds: float
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.expected == self.got


def check(
    name: str, assumptions: list[z3.BoolRef], claim: z3.BoolRef, *, expect_proof: bool
) -> Outcome:
    """Search for values meeting ``assumptions`` where ``claim`` fails."""
    began = time.perf_counter()
    solver = z3.Solver()
    solver.add(*assumptions)
    solver.add(z3.Not(claim))
    result = solver.check()
    took = time.perf_counter() - began
    if result == z3.unsat:
        got, detail = "proved", ""
    elif result == z3.sat:
        got, detail = "counterexample", " ".join(str(solver.model()).split())
    else:
        got, detail = "unknown", str(solver.reason_unknown())
    return Outcome(name, "proved" if expect_proof else "counterexample", got, took, detail)


# -- the claim: two rows, each locked after its own wait -----------------------------------


def _claim_scenario(*, base_from_answer: bool, lease_from_start: bool) -> dict[str, object]:
    """Symbols and constraints of one claim of two rows, and the fence the worker computes.

    ``base_from_answer``: the wrong rule "count the fence from when the answer arrived".
    ``lease_from_start``: the database's lease counted from the statement's start, not the
    lock (the rule before §1's "lease from the lock").
    """
    V, k, sent, d_out, w1, w2, d_back = z3.Reals("V k claim_sent d_out wait1 wait2 d_back")
    start = sent + k + d_out  # the statement starts on the database (wall clock)
    lock1, lock2 = start + w1, start + w2
    lease1 = (start if lease_from_start else lock1) + V  # not_visible_until of each row
    lease2 = (start if lease_from_start else lock2) + V
    answer = sent + d_out + _max(w1, w2) + d_back  # local time the answer arrives
    wall_now = answer + k
    locked_after = _min(w1, w2)  # the backend's measure, on its own clock
    base = answer if base_from_answer else sent + locked_after
    translated1 = answer + (lease1 - wall_now)  # local_row_deadline
    translated2 = answer + (lease2 - wall_now)
    fence = _min(base + V, _min(translated1, translated2))
    assumptions = [V > 0, d_out >= 0, w1 >= 0, w2 >= 0, d_back >= 0]
    return {
        "V": V,
        "k": k,
        "lease1": lease1,
        "lease2": lease2,
        "fence": fence,
        "fence_without_rows": base + V,
        "answer": answer,
        "spread": _max(w1, w2) - _min(w1, w2),
        "d_out": d_out,
        "d_back": d_back,
        "assumptions": assumptions,
    }


def claim_fence_within_the_lease(*, wrong: bool = False) -> Outcome:
    """(a) at registration: even without the cross-check against the rows' stored leases
    (its first term alone), the fence in wall time is no later than either row's lease.
    Twin: the fence counted from the answer's arrival."""
    s = _claim_scenario(base_from_answer=wrong, lease_from_start=False)
    fence = s["fence_without_rows"]
    claim = z3.And(fence + s["k"] <= s["lease1"], fence + s["k"] <= s["lease2"])
    name = (
        "claim fence from the answer time outlives the lease"
        if wrong
        else ("(a) claim: the fence never outlives a row's lease")
    )
    return check(name, s["assumptions"], claim, expect_proof=not wrong)


def renewal_fence_within_the_lease(*, wrong: bool = False) -> Outcome:
    """(a) after a renewal: ``max(previous, renewal_sent + V)`` in wall time is no later than
    the row's new lease, given the previous fence was within the previous lease (the leases
    never shrink: ``greatest()`` in the renewal statement). Twin: from the answer time."""
    V, k, prev, prev_lease, sent, d_out, d_back = z3.Reals(
        "V k previous previous_lease renewal_sent d_out d_back"
    )
    updated = sent + k + d_out  # the database's now() when it runs the renewal
    lease = _max(prev_lease, updated + V)
    answer = sent + d_out + d_back
    base = answer if wrong else sent
    fence = _max(prev, base + V)
    assumptions = [V > 0, d_out >= 0, d_back >= 0, prev + k <= prev_lease]
    name = (
        "renewal fence from the answer time outlives the lease"
        if wrong
        else ("(a) renewal: the fence never outlives the row's lease")
    )
    return check(name, assumptions, fence + k <= lease, expect_proof=not wrong)


def delayed_claim_delivers_a_live_lease(*, wrong: bool = False) -> Outcome:
    """(e) §1: however long the claim waited for its locks, the batch arrives with a live
    fence, if the rows were locked within ``spread`` of each other and the two trips took
    less than ``V - spread``. Twin: leases counted from the statement's start, where a
    lock wait of V or more delivers a dead lease."""
    s = _claim_scenario(base_from_answer=False, lease_from_start=wrong)
    assumptions = [*s["assumptions"], s["d_out"] + s["d_back"] + s["spread"] < s["V"]]
    claim = s["fence"] > s["answer"]
    name = (
        "a claim delayed by a lock, leases from the statement start, arrives dead"
        if wrong
        else ("(e) claim delayed by a lock still delivers a live lease")
    )
    return check(name, assumptions, claim, expect_proof=not wrong)


# -- (b) after the database goes away -------------------------------------------------------


def handler_stops_after_database_loss(*, wrong: bool = False) -> Outcome:
    """(b) I3: the database stops executing statements at ``loss``. The last renewal that
    ran was sent at ``s`` (it ran before the loss); the next one, sent a beat later, did not
    run. The handler's scope stops at the fence, or at most ``GRACE`` later while a renewal
    sent before the fence is still in flight (docs/protocol.rst §3). Then the stop lies in
    ``[loss + V - H - d_out, loss + V + GRACE]``. Twin: the fence from the answer time,
    which a slow answer pushes past ``loss + V + GRACE``."""
    V, H, s, loss, d_out, d_back, wait = z3.Reals("V H last_sent loss d_out d_back give_up_wait")
    assumptions = [
        z3.And(H > 0, V > H, d_out >= 0, d_back >= 0),
        s + d_out < loss,  # the last renewal ran before the loss...
        s + H + d_out >= loss,  # ...and the one sent a beat later did not
        z3.And(wait >= 0, wait <= GRACE),
    ]
    base = s + d_out + d_back if wrong else s  # when the fence's renewal was sent
    stop = base + V + wait
    claim = z3.And(loss + V - H - d_out <= stop, stop <= loss + V + GRACE)
    name = "(b) I3: a handler stops within [V - H - d_out, V + grace] of the database's loss"
    if wrong:
        name = "the fence from the answer time stops a handler late after the loss"
    return check(name, assumptions, claim, expect_proof=not wrong)


# -- (c) failed renewals -------------------------------------------------------------------


def _retry_delay(H: z3.ArithRef, remaining: z3.ArithRef, *, floor: bool) -> z3.ArithRef:
    """``retry_delay``: ``min(H, max(MIN_RETRY, remaining / 2))`` (without the floor: the
    wrong rule ``min(H, remaining / 2)``)."""
    return _min(H, _max(z3.RealVal(MIN_RETRY), remaining / 2) if floor else remaining / 2)


def failed_renewals_are_finitely_many(*, wrong: bool = False) -> Outcome:
    """(c) a failed renewal is retried after at least ``min(H, MIN_RETRY)`` seconds, so a
    lease of ``V`` sees at most ``V / min(H, MIN_RETRY) + 1`` renewal statements however
    they fail. Twin: without the 0.25 s floor the pause shrinks with the lease towards
    zero, and no positive bound exists."""
    H, remaining = z3.Reals("H remaining")
    delay = _retry_delay(H, remaining, floor=not wrong)
    assumptions = [H > 0, remaining > 0]
    claim = delay >= _min(H, z3.RealVal(MIN_RETRY))
    name = "(c) failed renewals: at least min(H, 0.25 s) apart, so finitely many per lease"
    if wrong:
        name = "retry pauses without the floor shrink to nothing"
    return check(name, assumptions, claim, expect_proof=not wrong)


def failed_renewals_go_on_until_the_lease_ends(*, wrong: bool = False) -> Outcome:
    """(c) a failed renewal is retried before the fence while more than ``2 * MIN_RETRY``
    of the lease is left: the guard never gives a lease up early. Twin: a fixed pause of
    one beat, which lands after the fence of a lease with less than ``H`` left."""
    H, remaining = z3.Reals("H remaining")
    delay = H if wrong else _retry_delay(H, remaining, floor=True)
    assumptions = [H > 0, remaining > 2 * MIN_RETRY]
    name = "(c) failed renewals are retried before the fence while the lease lasts"
    if wrong:
        name = "a fixed one-beat retry pause misses the end of the lease"
    return check(name, assumptions, delay < remaining, expect_proof=not wrong)


# -- (d) max_job_duration --------------------------------------------------------------------


def duration_stops_hooks_and_handler(*, wrong: bool = False) -> Outcome:
    """(d) I4: the batch's scope, which holds the claim hooks and the handler, has the
    deadline ``min(fence, registration + D, shutdown)``, so both are stopped by
    ``registration + D`` however long the hooks take. Twin: counting D from the handler's
    start, after the hooks, which a slow hook pushes past ``registration + D``."""
    fence, registered, D, shutdown, hooks = z3.Reals("fence registered D shutdown hooks_took")
    start = registered + hooks if wrong else registered
    deadline = _min(fence, _min(start + D, shutdown))
    assumptions = [D > 0, hooks >= 0]
    name = "(d) I4: claim hooks and handler are stopped at registration + D"
    if wrong:
        name = "D counted from the handler's start lets the hooks overrun it"
    return check(name, assumptions, deadline <= registered + D, expect_proof=not wrong)


# -- the encoding is the code --------------------------------------------------------------


def encoding_matches_the_core(samples: int = 300) -> Outcome:
    """The formulas above are those of ``trioqueue._core.fence``: evaluated on sampled
    values, the encoding's fence equals ``initial_deadline`` and ``advanced_deadline``."""
    began = time.perf_counter()
    rng = random.Random(1)
    s = _claim_scenario(base_from_answer=False, lease_from_start=False)
    for _ in range(samples):
        v, k = rng.uniform(0.1, 60), rng.uniform(-1e6, 1e6)
        sent, d_out, w1, w2, d_back = (rng.uniform(0, 100) for _ in range(5))
        values = {"V": v, "k": k, "claim_sent": sent, "d_out": d_out, "wait1": w1}
        values |= {"wait2": w2, "d_back": d_back}
        subs = [(z3.Real(name), z3.RealVal(value)) for name, value in values.items()]

        def evaluate(expr: object, subs: list[tuple[z3.ArithRef, z3.RatNumRef]] = subs) -> float:
            simplified = z3.simplify(z3.substitute(expr, *subs))
            return float(simplified.as_fraction())

        lease1, lease2 = evaluate(s["lease1"]), evaluate(s["lease2"])
        answer = evaluate(s["answer"])
        core = initial_deadline(sent + min(w1, w2), v, answer, answer + k, [lease1, lease2])
        if abs(core - evaluate(s["fence"])) > 1e-6 * max(1.0, abs(core)):
            return Outcome("the encoding is the core's", "proved", "counterexample", 0, str(values))
        remaining = rng.uniform(0, 2 * v)
        encoded = _retry_delay(z3.RealVal(v / 3), z3.RealVal(remaining), floor=True)
        if abs(retry_delay(v / 3, remaining) - evaluate(encoded)) > 1e-9:
            return Outcome("the encoding is the core's", "proved", "counterexample", 0, "retry")
        previous = rng.uniform(0, 200)
        if advanced_deadline(previous, sent, v) != max(previous, sent + v):
            return Outcome("the encoding is the core's", "proved", "counterexample", 0, "renewal")
    return Outcome(
        f"the encoding is the core's ({samples} samples)",
        "proved",
        "proved",
        time.perf_counter() - began,
    )


PROOFS: list[Callable[[], Outcome]] = [
    encoding_matches_the_core,
    claim_fence_within_the_lease,
    lambda: claim_fence_within_the_lease(wrong=True),
    renewal_fence_within_the_lease,
    lambda: renewal_fence_within_the_lease(wrong=True),
    delayed_claim_delivers_a_live_lease,
    lambda: delayed_claim_delivers_a_live_lease(wrong=True),
    handler_stops_after_database_loss,
    lambda: handler_stops_after_database_loss(wrong=True),
    failed_renewals_are_finitely_many,
    lambda: failed_renewals_are_finitely_many(wrong=True),
    failed_renewals_go_on_until_the_lease_ends,
    lambda: failed_renewals_go_on_until_the_lease_ends(wrong=True),
    duration_stops_hooks_and_handler,
    lambda: duration_stops_hooks_and_handler(wrong=True),
]
