"""The symbolic executor of proofs/symbolic.py, which the timing proofs run the core on.

It must find every feasible path of a function and no infeasible one, keep what it can
decide concrete, refuse code that reads a symbolic value as a float, and let a wrong claim
come back with a counterexample (a proof that cannot fail proves nothing).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests._modules import load_file
from trioqueue._core.timing import retry_delay

sym = load_file(Path(__file__).parents[2] / "proofs" / "symbolic.py")


def test_both_sides_of_a_branch_are_explored() -> None:
    x, y = sym.reals("x y")
    paths = sym.explore(lambda: min(x, y))
    assert len(paths) == 2
    assert {str(p.result.term) for p in paths} == {"x", "y"}


def test_each_path_condition_says_which_side_it_took() -> None:
    x, y = sym.reals("x y")
    paths = sym.explore(lambda: max(x, y))
    for path in paths:
        # On its own path, the result is the larger of the two: no value contradicts it.
        z3 = sym.z3
        solver = z3.Solver()
        solver.add(path.condition, z3.Not(sym.all_of(path.result >= x, path.result >= y)))
        assert solver.check() == z3.unsat


def test_a_side_the_assumptions_rule_out_is_never_taken() -> None:
    (x,) = sym.reals("x")

    def nested() -> str:
        if x > 1:
            return "negative too" if x < 0 else "above one"
        return "at most one"

    assert [p.result for p in sym.explore(nested)] == ["above one", "at most one"]
    assert [p.result for p in sym.explore(nested, [x > 2])] == ["above one"]


def test_the_core_function_itself_has_one_path_per_case() -> None:
    h, remaining = sym.reals("H remaining")
    # min(H, max(0.25, remaining / 2)): two comparisons, four combinations, all feasible.
    assert len(sym.explore(lambda: retry_delay(h, remaining), [h > 0])) == 4
    # With H below the floor, min(H, ...) can only be H: the other two paths are pruned.
    below = sym.explore(lambda: retry_delay(h, remaining), [h > 0, h < 0.25])
    assert [str(p.result.term) for p in below] == ["H", "H"]


def test_a_true_claim_is_proved() -> None:
    h, remaining = sym.reals("H remaining")
    verdict = sym.prove(
        lambda: retry_delay(h, remaining),
        lambda delay: sym.all_of(delay >= sym.smallest(h, 0.25), delay <= h),
        [h > 0],
    )
    assert verdict.got == "proved"
    assert verdict.paths == 4


def test_a_wrong_claim_gets_a_counterexample() -> None:
    h, remaining = sym.reals("H remaining")
    verdict = sym.prove(lambda: retry_delay(h, remaining), lambda d: d >= 0.25, [h > 0])
    assert verdict.got == "counterexample"
    # The counterexample is real: with its H, the core's own function breaks the claim.
    h_found, remaining_found = (float(sym.Fraction(verdict.model[n])) for n in ("H", "remaining"))
    assert retry_delay(h_found, remaining_found) < 0.25


def test_a_path_that_raises_is_a_counterexample() -> None:
    (x,) = sym.reals("x")

    def fails_when_negative() -> object:
        if x < 0:
            raise KeyError("negative")
        return x

    verdict = sym.prove(fails_when_negative, lambda _: True)
    assert verdict.got == "counterexample"
    assert "KeyError" in verdict.detail
    assert sym.prove(fails_when_negative, lambda _: True, [x >= 0]).got == "proved"


def test_infinity_and_identity_decide_without_a_branch() -> None:
    (x,) = sym.reals("x")
    paths = sym.explore(lambda: (min(x, math.inf), max(x, -math.inf), bool(x == x)))
    assert len(paths) == 1
    smaller, larger, same = paths[0].result
    assert smaller is x and larger is x and same is True
    assert (x < math.inf) is True and (x > math.inf) is False


def test_floor_builds_an_integer_term() -> None:
    (x,) = sym.reals("x")
    verdict = sym.prove(
        lambda: math.floor(x / 2),
        lambda k: sym.all_of(k <= x / 2, k > x / 2 - 1),
    )
    assert verdict.got == "proved"


def test_code_that_reads_a_float_is_refused() -> None:
    (x,) = sym.reals("x")
    with pytest.raises(sym.NotGeneric):
        sym.explore(lambda: math.isnan(x))
    with pytest.raises(sym.NotGeneric):
        sym.explore(lambda: x + math.inf)


def test_a_condition_is_no_bool_outside_an_exploration() -> None:
    (x,) = sym.reals("x")
    with pytest.raises(sym.NotGeneric):
        bool(x < 1)
