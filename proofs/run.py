"""Run every proof: ``python proofs/run.py`` (``nox -s proofs``). Exit 1 if any fails."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from timing import PROOFS


def main() -> int:
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
