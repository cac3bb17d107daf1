"""Mutation testing of ``trioqueue/_core/``: ``python proofs/mutants/run.py`` (``nox -s mutants``).

Runs mutmut (configured in pyproject.toml, ``[tool.mutmut]``) afresh over the core, with
the database-free unit tests and ``proofs/run.py``'s pieces (``proofs/test_proofs.py``) as
the test command, then prints the score and every survivor, and records the run in
``proofs/mutants/last-run.json`` (then ``python proofs/backers.py --write`` shows it in
proofs/README.md). Exits 1 when a survivor is neither killed nor listed,
with its reason, in ``proofs/mutants/equivalent.toml``; 0 otherwise. docs/testing.rst
says how to read the report.

    python proofs/mutants/run.py              # a full run, from a fresh working copy
    python proofs/mutants/run.py --survivors  # re-test only the last run's survivors
    python proofs/mutants/run.py --report     # judge the last run's results again

A run uses two test processes at a time under ``nice``: the machine stays usable.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import report

ROOT = Path(__file__).resolve().parents[2]
WORKDIR = ROOT / "mutants"
HERE = ROOT / "proofs" / "mutants"
#: No unit test may reach a database; if one tried, this address refuses it at once.
UNREACHABLE_DSN = "postgresql://nobody@127.0.0.1:1/none"


def mutmut_command() -> list[str]:
    mutmut = Path(sys.executable).with_name("mutmut")
    return ["nice", "-n", "10", str(mutmut), "run", "--max-children", "2"]


def run_mutmut() -> int:
    """Test every mutant without a result yet (all of them in a fresh working copy)."""
    env = os.environ | {"TRIOQUEUE_TEST_DSN": UNREACHABLE_DSN}
    return subprocess.run(mutmut_command(), cwd=ROOT, env=env, check=False).returncode


def forget_survivors(workdir: Path) -> None:
    """Clear the result of every mutant not caught, so that mutmut tests it again (with the
    tests as they are now). Functions changed since are mutated afresh by mutmut itself."""
    for meta in workdir.rglob("*.py.meta"):
        data = json.loads(meta.read_text("utf-8"))
        codes = data["exit_code_by_key"]
        for name, code in codes.items():
            if report.status_of(code) not in report.CAUGHT:
                codes[name] = None
        meta.write_text(json.dumps(data, indent=4), encoding="utf-8")


def judged_now() -> report.Judged:
    mutants = report.read_mutants(WORKDIR)
    return report.judge(mutants, report.load_equivalents(HERE / "equivalent.toml"))


def record(judged: report.Judged, seconds: float | None, *, fresh: bool) -> None:
    """Write last-run.json. A re-test of survivors keeps the last full run's time (the
    time a full run takes is the number worth knowing) and adds its own; a report
    (``seconds`` None) only judges the last results again, against the list as it is now."""
    path = HERE / "last-run.json"
    previous = json.loads(path.read_text("utf-8")) if path.exists() else {}
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    tool = f"mutmut {importlib.metadata.version('mutmut')}"
    data = report.summary(judged, tool=tool, seconds=seconds or 0.0, date=today)
    if seconds is None:
        data |= {k: previous[k] for k in ("date", "seconds", "retest_seconds") if k in previous}
    elif not fresh and previous:
        data["retest_seconds"] = data["seconds"]
        data["seconds"] = previous["seconds"]
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--survivors", action="store_true", help="re-test the last survivors")
    mode.add_argument("--report", action="store_true", help="only report the last run")
    args = parser.parse_args(argv)
    if not args.report:
        began = time.monotonic()
        if args.survivors:
            forget_survivors(WORKDIR)
        else:
            shutil.rmtree(WORKDIR, ignore_errors=True)
        code = run_mutmut()
        if code != 0:
            print(f"mutmut ended with exit code {code}", file=sys.stderr)
            return code
        record(judged_now(), time.monotonic() - began, fresh=not args.survivors)
    judged = judged_now()
    if not judged.mutants:
        print("no results in mutants/: run without --report first", file=sys.stderr)
        return 2
    if args.report:
        record(judged, None, fresh=False)
    print(report.render(judged), end="")
    return 1 if judged.unexplained else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
