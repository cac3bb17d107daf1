"""A small symbolic executor: run the core's own functions on z3 terms, over every path.

Theory of operation
-------------------
The timing code of ``trioqueue._core`` uses nothing but ``+ - * /``, ``min``, ``max``,
``math.floor`` and comparisons on its times. :class:`Num` wraps a z3 real term and
implements exactly those: arithmetic builds a bigger term, and a comparison gives a
:class:`Cond`, a symbolic boolean. The one place where a symbolic value must become a real
Python ``bool`` is an ``if`` (or ``and``, ``or``, ``not``, ``min``, ``max``, a heap's tuple
comparison): there :meth:`Cond.__bool__` asks the *path oracle* of the exploration under way.

:func:`explore` runs a function once per feasible path. The first run takes ``True`` at every
branch whose both sides z3 finds feasible (under the assumptions and the branches taken so
far) and remembers the untaken ``False`` as a prefix to explore; a run that replays a
prefix takes the recorded answers, then goes on the same way. A side z3 finds infeasible is
never taken, so the paths found are exactly the feasible ones. Each path ends with its
*path condition* (the conjunction of the branches taken) and the function's result, whose
times are terms over the symbols. :func:`prove` then asks z3 whether a claim about the
result can fail on any path: ``unsat`` everywhere is a proof for every real value of the
symbols that meets the assumptions, and a ``sat`` path gives a counterexample.

Concretely decidable comparisons stay concrete: ints and floats compare as Python does,
a term compared with ``math.inf`` or ``-inf`` is decided at once (a term is always finite),
and a condition z3 simplifies to ``True`` or ``False`` (``x == x``) is no branch at all.
Arithmetic with an infinite float is an error, as is reading a term as a float (``float()``,
``math.isnan``): code that does either is not generic over its number type, and the
exploration says so rather than proving something about a copy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Generic, TypeVar

import z3

T = TypeVar("T")

#: Above this many paths an exploration stops: the function branches more than a proof
#: should have to follow (a loop over a symbolic bound, say).
MAX_PATHS = 2000

#: How long z3 may think about one question. Its nonlinear arithmetic (``floor(x / H) * H``,
#: the pool's beat) can get stuck on a query it usually answers at once: past this the
#: answer is ``unknown``, a branch is explored (sound), and a claim is not proved.
TIMEOUT_MS = 5000


def solver() -> z3.Solver:
    made = z3.Solver()
    made.set("timeout", TIMEOUT_MS)
    return made


class NotGeneric(TypeError):
    """The code under exploration read a symbolic value as a plain number."""


# -- symbolic values -----------------------------------------------------------------------


def _term(value: object) -> z3.ArithRef:
    """The z3 term of a number: a :class:`Num`'s own, or an exact constant."""
    if isinstance(value, Num):
        return value.term
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
        raise NotGeneric(f"not a number: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise NotGeneric(f"arithmetic with {value!r} on a symbolic value")
    exact = Fraction(value)
    return z3.RealVal(exact.numerator) / z3.RealVal(exact.denominator)


class Num:
    """A real number given by a z3 term: arithmetic builds terms, comparisons give
    :class:`Cond`."""

    __slots__ = ("term",)
    __hash__ = None  # type: ignore[assignment]  # symbolic equality is not identity

    def __init__(self, term: z3.ArithRef) -> None:
        self.term = term

    def __repr__(self) -> str:
        return f"Num({self.term})"

    # arithmetic
    def __add__(self, other: object) -> Num:
        return Num(self.term + _term(other))

    def __radd__(self, other: object) -> Num:
        return Num(_term(other) + self.term)

    def __sub__(self, other: object) -> Num:
        return Num(self.term - _term(other))

    def __rsub__(self, other: object) -> Num:
        return Num(_term(other) - self.term)

    def __mul__(self, other: object) -> Num:
        return Num(self.term * _term(other))

    def __rmul__(self, other: object) -> Num:
        return Num(_term(other) * self.term)

    def __truediv__(self, other: object) -> Num:
        return Num(self.term / _term(other))

    def __rtruediv__(self, other: object) -> Num:
        return Num(_term(other) / self.term)

    def __neg__(self) -> Num:
        return Num(-self.term)

    def __pos__(self) -> Num:
        return self

    def __floor__(self) -> Num:
        return Num(z3.ToReal(z3.ToInt(self.term)))

    def __float__(self) -> float:
        raise NotGeneric(f"a symbolic value read as a float: {self.term}")

    # comparisons: a term is finite, so one with an infinite float decides at once
    def _compare(
        self,
        other: object,
        op: Callable[[z3.ArithRef, z3.ArithRef], z3.BoolRef],
        *,
        below_inf: bool,
        above_neg_inf: bool,
    ) -> Cond | bool:
        if isinstance(other, float) and not math.isfinite(other):
            if math.isnan(other):
                return op is _ne
            return below_inf if other > 0 else above_neg_inf
        return Cond(op(self.term, _term(other)))

    def __lt__(self, other: object) -> Cond | bool:
        return self._compare(other, _lt, below_inf=True, above_neg_inf=False)

    def __le__(self, other: object) -> Cond | bool:
        return self._compare(other, _le, below_inf=True, above_neg_inf=False)

    def __gt__(self, other: object) -> Cond | bool:
        return self._compare(other, _gt, below_inf=False, above_neg_inf=True)

    def __ge__(self, other: object) -> Cond | bool:
        return self._compare(other, _ge, below_inf=False, above_neg_inf=True)

    def __eq__(self, other: object) -> Cond | bool:  # type: ignore[override]
        if not _number(other):
            return False
        return self._compare(other, _eq, below_inf=False, above_neg_inf=False)

    def __ne__(self, other: object) -> Cond | bool:  # type: ignore[override]
        if not _number(other):
            return True
        return self._compare(other, _ne, below_inf=True, above_neg_inf=True)


def _number(value: object) -> bool:
    return isinstance(value, Num | int | float | Fraction) and not isinstance(value, bool)


def _lt(a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return a < b


def _le(a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return a <= b


def _gt(a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return a > b


def _ge(a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return a >= b


def _eq(a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return a == b


def _ne(a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return a != b


class Cond:
    """A symbolic boolean. Used as a Python ``bool`` it asks the path oracle, which is only
    there while :func:`explore` runs a function."""

    __slots__ = ("term",)

    def __init__(self, term: z3.BoolRef) -> None:
        self.term = term

    def __repr__(self) -> str:
        return f"Cond({self.term})"

    def __bool__(self) -> bool:
        if _oracle is None:
            raise NotGeneric(f"a symbolic condition decided outside an exploration: {self.term}")
        return _oracle.decide(self.term)


def real(name: str) -> Num:
    """A fresh symbolic real."""
    return Num(z3.Real(name))


def reals(names: str) -> tuple[Num, ...]:
    return tuple(real(name) for name in names.split())


def term(value: object) -> z3.BoolRef:
    """The z3 term of a truth value: a :class:`Cond`, a Python bool or a z3 boolean."""
    if isinstance(value, Cond):
        return value.term
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if isinstance(value, z3.BoolRef):
        return value
    raise NotGeneric(f"not a truth value: {value!r}")


def all_of(*values: object) -> z3.BoolRef:
    return z3.And(*(term(v) for v in values))


def any_of(*values: object) -> z3.BoolRef:
    return z3.Or(*(term(v) for v in values))


def implies(premise: object, conclusion: object) -> z3.BoolRef:
    return z3.Implies(term(premise), term(conclusion))


def value_of(x: object) -> z3.ArithRef:
    """The z3 term of a number, to compare results across paths or with z3 directly."""
    return _term(x)


def smallest(*values: object) -> Num:
    """``min`` for a claim, as one term (a claim is checked, not explored: no branches)."""
    terms = [_term(v) for v in values]
    result = terms[0]
    for t in terms[1:]:
        result = z3.If(t < result, t, result)
    return Num(result)


def largest(*values: object) -> Num:
    """``max`` for a claim, as one term."""
    terms = [_term(v) for v in values]
    result = terms[0]
    for t in terms[1:]:
        result = z3.If(t > result, t, result)
    return Num(result)


# -- the path oracle -----------------------------------------------------------------------


class _Oracle:
    """Answers the branches of one run: a recorded prefix first, then what z3 allows."""

    def __init__(self, solver: z3.Solver, prefix: tuple[bool, ...]) -> None:
        self.solver = solver
        self.prefix = prefix
        self.decisions: list[bool] = []
        self.taken: list[z3.BoolRef] = []
        self.untaken: list[tuple[bool, ...]] = []

    def _feasible(self, condition: z3.BoolRef) -> bool:
        # ``unknown`` counts as feasible: exploring a path too many is sound (its claim is
        # then checked too), leaving one out would not be.
        self.solver.push()
        self.solver.add(condition)
        feasible = self.solver.check() != z3.unsat
        self.solver.pop()
        return feasible

    def decide(self, condition: z3.BoolRef) -> bool:
        simplified = z3.simplify(condition)
        if z3.is_true(simplified):
            return True
        if z3.is_false(simplified):
            return False
        index = len(self.decisions)
        if index < len(self.prefix):
            value = self.prefix[index]
        else:
            value = self._choose(condition)
        self.decisions.append(value)
        chosen = condition if value else z3.Not(condition)
        self.taken.append(chosen)
        self.solver.add(chosen)
        return value

    def _choose(self, condition: z3.BoolRef) -> bool:
        if not self._feasible(condition):
            return False  # the path is feasible, so the other side must be
        if self._feasible(z3.Not(condition)):
            self.untaken.append((*self.decisions, False))
        return True


_oracle: _Oracle | None = None


@contextmanager
def _deciding(oracle: _Oracle) -> Iterator[None]:
    global _oracle
    previous, _oracle = _oracle, oracle
    try:
        yield
    finally:
        _oracle = previous


@dataclass(frozen=True)
class Path(Generic[T]):
    """One feasible path: its condition, and the result or the exception it ended with."""

    condition: z3.BoolRef
    result: T | None
    error: BaseException | None = None


def explore(
    run: Callable[[], T], assumptions: Sequence[object] = (), *, max_paths: int = MAX_PATHS
) -> list[Path[T]]:
    """Every feasible path of ``run()`` under ``assumptions``. ``run`` must build its state
    afresh each time (it is called once per path) and decide only on its symbols."""
    paths_solver = solver()
    paths_solver.add(*(term(a) for a in assumptions))
    pending: list[tuple[bool, ...]] = [()]
    paths: list[Path[T]] = []
    while pending:
        if len(paths) >= max_paths:
            raise RuntimeError(f"more than {max_paths} paths")
        oracle = _Oracle(paths_solver, pending.pop())
        paths_solver.push()
        try:
            with _deciding(oracle):
                result, error = run(), None
        except NotGeneric:
            raise
        except Exception as exc:  # a path that raises is a result: the claim fails on it
            result, error = None, exc
        finally:
            paths_solver.pop()
        paths.append(Path(z3.And(*oracle.taken), result, error))
        pending.extend(oracle.untaken)
    return paths


# -- proofs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What z3 said of a claim over every path: ``proved``, ``counterexample`` or
    ``unknown``, with the paths explored and a counterexample's values."""

    got: str
    paths: int
    seconds: float
    detail: str = ""
    model: dict[str, str] = field(default_factory=dict)


def _model_of(asked: z3.Solver) -> dict[str, str]:
    model = asked.model()
    # Constants only: a function such as z3's own ``/0`` (division by zero) says nothing.
    constants = [d for d in model.decls() if d.arity() == 0]
    return {str(d): str(model[d]) for d in sorted(constants, key=str)}


def prove(
    run: Callable[[], T],
    claim: Callable[[T], object],
    assumptions: Sequence[object] = (),
) -> Verdict:
    """Whether ``claim(result)`` holds on every path of ``run()`` for every value of the
    symbols that meets ``assumptions``."""
    began = time.perf_counter()
    paths = explore(run, assumptions)
    unknown = ""
    for path in paths:
        asked = solver()
        asked.add(*(term(a) for a in assumptions), path.condition)
        if path.error is None:
            asked.add(z3.Not(term(claim(path.result))))  # type: ignore[arg-type]
        outcome = asked.check()
        if outcome == z3.sat:
            what = "raised " + repr(path.error) if path.error is not None else "claim fails"
            model = _model_of(asked)
            detail = f"{what}: " + " ".join(f"{k}={v}" for k, v in model.items())
            return Verdict("counterexample", len(paths), time.perf_counter() - began, detail, model)
        if outcome == z3.unknown:
            unknown = str(asked.reason_unknown())
    took = time.perf_counter() - began
    return Verdict("unknown" if unknown else "proved", len(paths), took, unknown)
