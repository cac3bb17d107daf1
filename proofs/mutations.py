"""The one-line mutations of the core that ``proofs/run.py`` must catch (issue #23).

``python proofs/mutations.py [--only NAME] [--parts z3,traces,model]``: for each mutation,
copy the source tree to a temporary directory, apply its one replacement there (it fails
loudly unless the text occurs exactly once), run ``python proofs/run.py`` in the copy with
``PYTHONPATH`` at the copy, and report whether it was *caught* (some part failed) and by
which parts: ``z3`` (the timing proofs), ``traces`` (the conformance traces and the corpus)
or ``model`` (the model check). Exit 1 if any mutation is missed.

Each mutation is data: the file, the exact text to replace, its replacement, and what it
breaks. The texts are short on purpose, so that they survive edits around them; one that
no longer matches is an error, not a pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What a copy needs: the package and the proofs (the tests and docs are not run).
COPIED = ("trioqueue", "proofs")
#: ``--why`` shows this many of a mutant's failures.
SHOWN = 4


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str  # relative to the repository root
    text: str  # exact source text, found exactly once
    replacement: str
    breaks: str  # the rule it breaks (docs/protocol.rst)


GUARD = "trioqueue/_core/guard_rules.py"

MUTATIONS: list[Mutation] = [
    Mutation(
        "renewal-fence-late",
        "trioqueue/_core/fence.py",
        "return max(previous, renewal_sent + visibility_timeout)",
        "return max(previous, renewal_sent + visibility_timeout + 1)",
        "§3: the fence after a renewal is renewal_sent + V, a second later outlives the row",
    ),
    Mutation(
        "renewal-fence-from-answer",
        GUARD,
        "advanced_deadline(batch.lease_deadline, renewal.sent_at, v)",
        "advanced_deadline(batch.lease_deadline, now, v)",
        "§3: the fence counts from the renewal's send, not the answer's arrival",
    ),
    Mutation(
        "row-lease-ignored",
        GUARD,
        "initial_deadline(claim_sent, v, now, wall_now, row_deadlines)",
        "initial_deadline(claim_sent, v, now, wall_now, ())",
        "§3: the fence at registration is cross-checked against every row's own lease",
    ),
    Mutation(
        "retry-at-the-beat",
        GUARD,
        "now + retry_delay(self.timing.heartbeat_interval, remaining)",
        "self._next_beat(now)",
        "§2: a failed renewal is retried after min(H, max(0.25, remaining / 2))",
    ),
    Mutation(
        "retry-without-floor",
        "trioqueue/_core/timing.py",
        "max(MIN_RETRY, remaining / 2.0)",
        "remaining / 2.0",
        "§2: retries are at least 0.25 s apart",
    ),
    Mutation(
        "second-abandonment",
        GUARD,
        "if current is None or self._slot_taken() or now < current.abandon_at:",
        "if current is None or now < current.abandon_at:",
        "§6, I5: one renewal abandoned at a time",
    ),
    Mutation(
        "gone-at-once",
        "trioqueue/_core/rules.py",
        "stops=StopReason.GONE, believed_after=2",
        "stops=StopReason.GONE, believed_after=1",
        "§2: gone is believed on the second consecutive sighting",
    ),
    Mutation(
        "late-answer-applied",
        GUARD,
        "if current is None or current.token != token:",
        "if current is None:",
        "§6, I6: an answer whose token is not current changes nothing",
    ),
    Mutation(
        "expiry-after-slot-cleared",
        GUARD,
        "        for batch in self._carried(current):\n"
        "            self._expire_if_due(batch, now)\n"
        "        self.current = None\n",
        "        self.current = None\n"
        "        for batch in self._carried(current):\n"
        "            self._expire_if_due(batch, now)\n",
        "§3 (S1): expiry is judged while the renewal still counts as in flight",
    ),
    Mutation(
        "cancel-over-reclaimed",
        GUARD,
        "if job.stop is None or job.stop is StopReason.CANCELLED:",
        "if job.stop is None:",
        "§10 (S3): reclaimed or gone overrides an earlier cancel",
    ),
    Mutation(
        "duration-late",
        GUARD,
        "else now + d,",
        "else now + d + 1,",
        "§4, I4: claim hooks and handler stop at registration + D",
    ),
    Mutation(
        "duration-final",
        "trioqueue/_core/outcome.py",
        "error = duration_message(max_job_duration)",
        "return Outcome(OutcomeKind.FAILED, duration_message(max_job_duration))",
        "§4: max_job_duration is a charged, retryable failure",
    ),
    Mutation(
        "duration-table-final",
        "trioqueue/_core/rules.py",
        "StopReason.DURATION: OutcomeKind.RETRY",
        "StopReason.DURATION: OutcomeKind.FAILED",
        "§4: the stop table says retry (without a connection: released uncharged)",
    ),
]


def apply(mutation: Mutation, root: Path) -> None:
    """Apply the one replacement in the tree at ``root``; fail unless it matches once."""
    path = root / mutation.file
    source = path.read_text(encoding="utf-8")
    found = source.count(mutation.text)
    if found != 1:
        raise SystemExit(
            f"mutation {mutation.name}: its text occurs {found} times in {mutation.file}, "
            f"not once:\n{mutation.text}"
        )
    path.write_text(source.replace(mutation.text, mutation.replacement), encoding="utf-8")


@dataclass(frozen=True)
class Result:
    mutation: Mutation
    failed_parts: list[str]
    seconds: float
    #: What ``run.py`` said failed (its ``FAIL`` lines), to see why a mutation was caught.
    failures: list[str]

    @property
    def caught(self) -> bool:
        return bool(self.failed_parts)


def failed_parts(output: str, returncode: int) -> list[str]:
    """The parts ``run.py`` says failed; a run that crashed before saying is caught by all."""
    for line in reversed(output.splitlines()):
        if line.startswith("failed parts: "):
            named = line.removeprefix("failed parts: ").strip()
            return [] if named == "none" else named.split(",")
    return ["crashed"] if returncode else []


def run_one(mutation: Mutation, parts: str) -> Result:
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutation.name}-") as temp:
        copy = Path(temp)
        for name in COPIED:
            shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        apply(mutation, copy)
        env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            [sys.executable, str(copy / "proofs" / "run.py"), "--parts", parts],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    failures = [line.strip() for line in done.stdout.splitlines() if line.startswith("FAIL")]
    parts = failed_parts(done.stdout, done.returncode)
    return Result(mutation, parts, time.perf_counter() - began, failures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="run only this mutation (repeatable)")
    parser.add_argument("--parts", default="z3,traces,model", help="parts of run.py to run")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--why", action="store_true", help="show what failed for each")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.only and len(chosen) != len(set(args.only)):
        parser.error(f"unknown mutation among {args.only}")
    if args.list:
        for mutation in chosen:
            print(f"{mutation.name:<28} {mutation.file:<32} {mutation.breaks}")
        return 0
    for mutation in chosen:  # every text must match before anything runs
        apply_check(mutation)
    began = time.perf_counter()
    missed = 0
    print(f"{'mutation':<28} {'result':<7} {'caught by':<20} {'time':>7}")
    for mutation in chosen:
        result = run_one(mutation, args.parts)
        missed += not result.caught
        status = "caught" if result.caught else "MISSED"
        by = ",".join(result.failed_parts) or "-"
        print(f"{mutation.name:<28} {status:<7} {by:<20} {result.seconds:6.1f}s", flush=True)
        shown = result.failures[:SHOWN] if args.why else []
        for line in shown:
            print(f"    {line[:160]}")
        if len(result.failures) > len(shown) > 0:
            print(f"    ... and {len(result.failures) - len(shown)} more")
    caught = len(chosen) - missed
    took = time.perf_counter() - began
    print(f"{caught} of {len(chosen)} mutations caught ({took:.0f} s)")
    return 1 if missed else 0


def apply_check(mutation: Mutation) -> None:
    """Fail loudly, before any run, if a mutation's text no longer occurs exactly once."""
    with tempfile.TemporaryDirectory() as temp:
        target = Path(temp) / mutation.file
        target.parent.mkdir(parents=True)
        shutil.copy(ROOT / mutation.file, target)
        apply(mutation, Path(temp))


if __name__ == "__main__":
    sys.exit(main())
