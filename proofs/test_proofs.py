"""``proofs/run.py``'s pieces as pytest items: one per z3 proof, one per model-check scope.

The mutants session (``nox -s mutants``, docs/testing.rst) runs these beside the unit
tests, so that a mutant of ``trioqueue/_core/`` counts as killed when a proof catches it,
and so that the mutation tool runs only the proofs that reach the mutated function. The
normal suite does not collect this file (pytest's ``testpaths`` is ``tests``); ``python
proofs/run.py`` stays the way to run the proofs themselves.

Left out, for time: the twins, which tests/unit/test_model_check.py runs as they are here;
and the scopes of more than one batch (three quarters of the model check's minute). Every
mutant that survives pays for every test that reaches its function, and nearly every test
of the guard reaches every function of it: with them, a survivor of the guard cost four
minutes of a shared 2-core machine. ``MUTANTS_ALL_SCOPES=1`` puts them back.

The modules are imported the way ``proofs/run.py`` imports them (its folder on
``sys.path``), by name at run time, so the type checker does not follow them into z3.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
timing: Any = importlib.import_module("timing")
model_check: Any = importlib.import_module("model_check")


def _proof_id(index: int) -> str:
    # The twins are lambdas (``wrong=True``); their position tells them apart.
    proof = timing.PROOFS[index]
    return f"{index:02d}-{getattr(proof, '__name__', 'proof')}"


@pytest.mark.parametrize("index", range(len(timing.PROOFS)), ids=_proof_id)
def test_timing_proof_ends_as_expected(index: int) -> None:
    outcome = timing.PROOFS[index]()
    assert outcome.ok, (
        f"{outcome.name}: expected {outcome.expected}, got {outcome.got}: {outcome.detail}"
    )


def _in_session(scope: Any) -> bool:
    return os.environ.get("MUTANTS_ALL_SCOPES") == "1" or len(scope.jobs_per_batch) == 1


@pytest.mark.parametrize(
    "scope", [s for s in model_check.SCOPES if _in_session(s)], ids=lambda scope: str(scope.name)
)
def test_model_check_scope_has_no_violation(scope: Any) -> None:
    result = model_check.explore(scope)
    assert result.violation is None, (result.violation, result.trace)
