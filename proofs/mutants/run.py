"""Mutation testing of ``trioqueue/_core/``: ``python proofs/mutants/run.py`` (``nox -s mutants``).

Runs mutmut (configured in pyproject.toml, ``[tool.mutmut]``) afresh over the core, with
the database-free unit tests and ``proofs/run.py``'s pieces (``proofs/test_proofs.py``) as
the test command, then prints the score and every survivor, and records the run in
``proofs/mutants/last-run.json``. Exits 1 when a survivor is neither killed nor listed,
with its reason, in ``proofs/mutants/equivalent.toml``; 0 otherwise. docs/testing.rst
says how to read the report.

    python proofs/mutants/run.py              # a full run, from a fresh working copy
    python proofs/mutants/run.py --survivors  # re-test only the last run's survivors
    python proofs/mutants/run.py --report     # only read the last run's results again

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


def mutmut_command(names: list[str]) -> list[str]:
    mutmut = Path(sys.executable).with_name("mutmut")
    return ["nice", "-n", "10", str(mutmut), "run", "--max-children", "2", *names]


def run_mutmut(names: list[str]) -> int:
    env = os.environ | {"TRIOQUEUE_TEST_DSN": UNREACHABLE_DSN}
    return subprocess.run(mutmut_command(names), cwd=ROOT, env=env, check=False).returncode


def judged_now() -> report.Judged:
    mutants = report.read_mutants(WORKDIR)
    return report.judge(mutants, report.load_equivalents(HERE / "equivalent.toml"))


def record(judged: report.Judged, seconds: float, *, fresh: bool) -> None:
    """Write last-run.json. A re-test of survivors keeps the last full run's time: the time
    a full run takes is the number worth knowing."""
    path = HERE / "last-run.json"
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    tool = f"mutmut {importlib.metadata.version('mutmut')}"
    data = report.summary(judged, tool=tool, seconds=seconds, date=today)
    if not fresh and path.exists():
        data["retest_seconds"] = data["seconds"]
        data["seconds"] = json.loads(path.read_text("utf-8"))["seconds"]
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--survivors", action="store_true", help="re-test the last survivors")
    mode.add_argument("--report", action="store_true", help="only report the last run")
    args = parser.parse_args(argv)
    if not args.report:
        began = time.monotonic()
        names: list[str] = []
        if args.survivors:
            names = [m.name for m in judged_now().mutants if m.status not in report.CAUGHT]
        else:
            shutil.rmtree(WORKDIR, ignore_errors=True)
        if not args.survivors or names:
            code = run_mutmut(names)
            if code != 0:
                print(f"mutmut ended with exit code {code}", file=sys.stderr)
                return code
        record(judged_now(), time.monotonic() - began, fresh=not args.survivors)
    judged = judged_now()
    if not judged.mutants:
        print("no results in mutants/: run without --report first", file=sys.stderr)
        return 2
    print(report.render(judged), end="")
    return 1 if judged.unexplained else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
