"""``proofs/run.py``'s pieces as pytest items: one per z3 proof, one per model-check scope.

The mutants session (``nox -s mutants``, docs/testing.rst) runs these beside the unit
tests, so that a mutant of ``trioqueue/_core/`` counts as killed when a proof catches it,
and so that the mutation tool runs only the proofs that reach the mutated function. The
normal suite does not collect this file (pytest's ``testpaths`` is ``tests``); ``python
proofs/run.py`` stays the way to run the proofs themselves.

Left out, for time: the twins (of the z3 proofs, which test the proofs rather than the
code, and of the model check, which tests/unit/test_model_check.py runs as they are here);
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
maintainer_timing: Any = importlib.import_module("maintainer_timing")
model_check: Any = importlib.import_module("model_check")


@pytest.mark.parametrize("proof", timing.PROOF_LIST, ids=lambda proof: str(proof.question.__name__))
def test_timing_proof_holds_of_the_code(proof: Any) -> None:
    """The proof's claim holds of the core as it is (its twins test the proof, not the
    code: ``python proofs/run.py`` runs them)."""
    outcome = timing.check(proof.name, proof.question, timing.THE_CODE)
    assert outcome.ok, f"{outcome.name}: expected proved, got {outcome.got}: {outcome.detail}"


@pytest.mark.parametrize(
    "proof", maintainer_timing.PROOF_LIST, ids=lambda proof: str(proof.question.__name__)
)
def test_maintainer_proof_holds_of_the_code(proof: Any) -> None:
    """As above, for the maintainer lease's core (``proofs/maintainer_timing.py``)."""
    outcome = maintainer_timing.check(proof.name, proof.question, maintainer_timing.THE_CODE)
    assert outcome.ok, f"{outcome.name}: expected proved, got {outcome.got}: {outcome.detail}"


def _in_session(scope: Any) -> bool:
    return os.environ.get("MUTANTS_ALL_SCOPES") == "1" or len(scope.jobs_per_batch) == 1


@pytest.mark.parametrize(
    "scope", [s for s in model_check.SCOPES if _in_session(s)], ids=lambda scope: str(scope.name)
)
def test_model_check_scope_has_no_violation(scope: Any) -> None:
    result = model_check.explore(scope)
    assert result.violation is None, (result.violation, result.trace)
