"""Run every proof: ``python proofs/run.py`` (``nox -s proofs``). Exit 1 if any fails.

Three parts, each of which checks the code itself:

- ``z3``: the timing proofs of ``timing.py`` and ``maintainer_timing.py``, which run the
  guard's and the maintainer's core functions on symbolic times, each with its negative
  twins;
- ``traces``: every conformance trace of ``traces/`` and every line of the drawn corpus
  (``corpus/scripts.jsonl``, when there is one) replayed through the current core, which
  must make every decision they record;
- ``model``: the exhaustive model check of ``model_check.py`` and its twins.

``--parts z3,traces`` runs only those (``proofs/mutations.py`` uses it). The last line
names the parts that failed, for a script to read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from trioqueue.testing.traces import load, replay, traces_in

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # timing.py, symbolic.py and model_check.py are scripts here
TRACES = HERE / "traces"
CORPUS = HERE / "corpus" / "scripts.jsonl"


def run_timing_proofs() -> int:
    import maintainer_timing
    import timing

    failed = total = 0
    began = time.perf_counter()
    for outcome in [*timing.run_all(), *maintainer_timing.run_all()]:
        total += 1
        mark = "ok  " if outcome.ok else "FAIL"
        print(
            f"{mark} {outcome.got:<15} {outcome.paths:>4} paths "
            f"{outcome.seconds * 1000:8.1f} ms  {outcome.name}"
        )
        if outcome.got == "counterexample" and outcome.ok:
            print(f"     counterexample: {outcome.detail}")
        if not outcome.ok:
            failed += 1
            print(f"     expected {outcome.expected}: {outcome.detail}")
    took = time.perf_counter() - began
    print(f"{total - failed} of {total} timing proofs as expected ({took:.1f} s)")
    return failed


def corpus_lines() -> list[tuple[str, dict[str, object]]]:
    """Each trace of the drawn corpus, named by its line; none while there is no corpus."""
    if not CORPUS.exists():
        return []
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    return [
        (f"{CORPUS.name}:{number}", json.loads(line))
        for number, line in enumerate(lines, 1)
        if line.strip()
    ]


def run_traces() -> int:
    """Every checked-in trace and corpus line must replay with no decision changed."""
    began = time.perf_counter()
    named = [(path.name, load(path)) for path in traces_in(TRACES)] + corpus_lines()
    failed = 0
    for name, trace in named:
        mismatches = replay(trace)
        if mismatches:
            failed += 1
            print(f"FAIL trace {name}: {mismatches[0]}")
    took = time.perf_counter() - began
    print(f"{len(named) - failed} of {len(named)} traces replay ({took:.1f} s)")
    return failed


def run_model_check() -> int:
    """Every scope must be explored without a violation; every twin must be caught."""
    from model_check import SCOPES, TWIN_SCOPE, TWINS, Result, explore, twin_found

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


PARTS = {"z3": run_timing_proofs, "traces": run_traces, "model": run_model_check}


def run_part(name: str) -> int:
    """A part's failures; one that raises has failed (a broken core may crash a proof)."""
    try:
        return PARTS[name]()
    except Exception:
        traceback.print_exc()
        print(f"FAIL part {name} raised")
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated: z3,traces,model")
    names = parser.parse_args(argv).parts.split(",")
    unknown = set(names) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    began = time.perf_counter()
    failing = [name for name in names if run_part(name)]
    print(f"proofs took {time.perf_counter() - began:.1f} s")
    print(f"failed parts: {','.join(failing) or 'none'}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
