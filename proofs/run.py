"""Run every proof: ``python proofs/run.py`` (``nox -s proofs``). Exit 1 if any fails."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from model_check import SCOPES, TWIN_SCOPE, TWINS, Result, explore, twin_found
from timing import PROOFS


def run_timing_proofs() -> int:
    failed = 0
    for proof in PROOFS:
        outcome = proof()
        mark = "ok  " if outcome.ok else "FAIL"
        print(f"{mark} {outcome.got:<15} {outcome.seconds * 1000:8.1f} ms  {outcome.name}")
        if outcome.got == "counterexample" and outcome.ok:
            print(f"     counterexample: {outcome.detail}")
        if not outcome.ok:
            failed += 1
            print(f"     expected {outcome.expected}: {outcome.detail}")
    print(f"{len(PROOFS) - failed} of {len(PROOFS)} as expected")
    return failed


def show(ok: bool, result: Result, what: str) -> None:
    mark = "ok  " if ok else "FAIL"
    print(
        f"{mark} {result.states:>7} states {result.transitions:>8} transitions "
        f"depth {result.depth:>2} {result.seconds:6.1f} s  {what}"
    )
    if result.violation is not None:
        print(f"     {result.violation}; shortest trace:")
        for step in result.trace:
            print(f"       {step}")


def run_model_check() -> int:
    """Every scope must be explored without a violation; every twin must be caught."""
    failed = 0
    for scope in SCOPES:
        result = explore(scope)
        ok = result.violation is None
        failed += not ok
        show(ok, result, f"model check: {scope.name}")
    for core, invariant in TWINS:
        result = explore(TWIN_SCOPE, core)
        ok = twin_found(result, invariant)
        failed += not ok
        show(ok, result, f"twin {core.__name__} must break {invariant}")
    total = len(SCOPES) + len(TWINS)
    print(f"{total - failed} of {total} model checks as expected")
    return failed


def main() -> int:
    failed = run_timing_proofs() + run_model_check()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
