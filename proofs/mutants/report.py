"""Read a mutmut run over ``trioqueue/_core/`` and judge its survivors (docs/testing.rst).

mutmut 3 writes a working copy, ``mutants/``, in which every function of a mutated file is
followed by its copies: ``x_f__mutmut_orig`` (the code as it is) and ``x_f__mutmut_1``,
``x_f__mutmut_2``, ... (one mutation each; a method's copies are named ``xǁClassǁf__...``).
Beside each file, ``<file>.meta`` (JSON) holds the exit code of each mutant's tests.

A mutant's number changes whenever the code above it changes, so a survivor is named here
by what does not: its file, its function, and the line it changes, as it was and as the
mutant has it. ``proofs/mutants/equivalent.toml`` lists the survivors that are equivalent
(no test can tell them from the code), each with its reason, matched by those three.

Plain data and string functions only: no import beyond the standard library, so that the
report can be read and tested without mutmut installed.
"""

from __future__ import annotations

import ast
import difflib
import json
import textwrap
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: mutmut 3's exit codes (``mutmut.stats.status_by_exit_code``), by what they mean here.
KILLED_CODES = frozenset({1, 3})
SURVIVED_CODES = frozenset({0})
NO_TESTS_CODES = frozenset({5, 33})
TIMEOUT_CODES = frozenset({36, -24, 24, 152, 255})
SEPARATOR = "ǁ"


@dataclass(frozen=True)
class Mutant:
    """One mutant: ``file`` relative to the repository, ``function`` as ``f`` or ``C.f``."""

    name: str
    file: str
    function: str
    status: str
    was: str
    now: str


@dataclass(frozen=True)
class Equivalent:
    """An entry of equivalent.toml: a survivor no test can kill, and why."""

    file: str
    function: str
    was: str
    now: str
    reason: str

    def matches(self, mutant: Mutant) -> bool:
        return (self.file, self.function, self.was, self.now) == (
            mutant.file,
            mutant.function,
            mutant.was,
            mutant.now,
        )


def status_of(code: int | None) -> str:
    """What an exit code says about a mutant: killed, survived, timeout, no tests, ..."""
    if code is None:
        return "not checked"
    for status, codes in (
        ("killed", KILLED_CODES),
        ("survived", SURVIVED_CODES),
        ("no tests", NO_TESTS_CODES),
        ("timeout", TIMEOUT_CODES),
    ):
        if code in codes:
            return status
    return "caught by type check" if code == 37 else "suspicious"


def function_of(generated: str) -> str:
    """``xǁClassǁf__mutmut_3`` -> ``Class.f``; ``x_f__mutmut_3`` -> ``f``."""
    mangled = generated.partition("__mutmut_")[0]
    if mangled.startswith("x" + SEPARATOR):
        _, cls, name = mangled.split(SEPARATOR)
        return f"{cls}.{name}"
    return mangled.removeprefix("x_")


def _definitions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function defined at the top or in a class body, by name."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        body = node.body if isinstance(node, ast.ClassDef) else [node]
        for item in body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                found[item.name] = item
    return found


def _source_lines(source: Sequence[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    # The whole definition under one name: the copies differ in their names, and in nothing
    # else but the mutation (which may be in the signature: a default value).
    assert node.end_lineno is not None
    text = textwrap.dedent("\n".join(source[node.lineno - 1 : node.end_lineno]))
    return text.replace(node.name, "f", 1).splitlines()


def changed_lines(before: Sequence[str], after: Sequence[str]) -> tuple[str, str]:
    """The lines only ``before`` has and those only ``after`` has, each stripped and joined
    with `` / `` (``""`` when a side has none: a deleted or an added line)."""
    diff = list(difflib.ndiff(list(before), list(after)))
    was = [line[2:].strip() for line in diff if line.startswith("- ")]
    now = [line[2:].strip() for line in diff if line.startswith("+ ")]
    return " / ".join(was), " / ".join(now)


def describe(mutated_source: str, names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """For each generated mutant name of one mutated file: (line as it was, line as mutated)."""
    tree = ast.parse(mutated_source)
    lines = mutated_source.splitlines()
    functions = _definitions(tree)
    described = {}
    for name in names:
        generated = name.rpartition(".")[2]
        original = functions[generated.partition("__mutmut_")[0] + "__mutmut_orig"]
        described[name] = changed_lines(
            _source_lines(lines, original), _source_lines(lines, functions[generated])
        )
    return described


def read_mutants(workdir: Path) -> list[Mutant]:
    """Every mutant of the run whose working copy is ``workdir`` (``mutants/``)."""
    found = []
    for meta in sorted(workdir.rglob("*.py.meta")):
        codes: Mapping[str, int | None] = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
        if not codes:
            continue
        mutated = meta.with_suffix("")
        file = mutated.relative_to(workdir).as_posix()
        described = describe(mutated.read_text("utf-8"), codes)
        for name, code in codes.items():
            was, now = described[name]
            function = function_of(name.rpartition(".")[2])
            found.append(Mutant(name, file, function, status_of(code), was, now))
    return found


def load_equivalents(path: Path) -> list[Equivalent]:
    """The entries of equivalent.toml (``[[equivalent]]`` tables)."""
    data = tomllib.loads(path.read_text("utf-8")) if path.exists() else {}
    return [Equivalent(**entry) for entry in data.get("equivalent", [])]


#: Statuses that need nothing more: a test or a proof failed (or ran out of time) under it.
CAUGHT = frozenset({"killed", "timeout", "caught by type check"})


@dataclass(frozen=True)
class Judged:
    """A run's mutants sorted: caught, listed as equivalent, and left to explain."""

    mutants: tuple[Mutant, ...]
    equivalent: tuple[Mutant, ...]
    unexplained: tuple[Mutant, ...]
    stale: tuple[Equivalent, ...]  # entries no survivor of this run matches

    def count(self, status: str) -> int:
        return sum(m.status == status for m in self.mutants)

    @property
    def score(self) -> float:
        """Caught mutants over all mutants less the equivalent ones (1.0 for none)."""
        caught = sum(m.status in CAUGHT for m in self.mutants)
        judged = len(self.mutants) - len(self.equivalent)
        return caught / judged if judged else 1.0


def judge(mutants: Sequence[Mutant], equivalents: Sequence[Equivalent]) -> Judged:
    """Every mutant not caught is either matched by an entry or unexplained."""
    left = [m for m in mutants if m.status not in CAUGHT]
    listed = [m for m in left if any(e.matches(m) for e in equivalents)]
    stale = [e for e in equivalents if not any(e.matches(m) for m in left)]
    unexplained = [m for m in left if m not in listed]
    return Judged(tuple(mutants), tuple(listed), tuple(unexplained), tuple(stale))


def summary(judged: Judged, *, tool: str, seconds: float, date: str) -> dict[str, object]:
    """What proofs/mutants/last-run.json records of a run."""
    return {
        "date": date,
        "tool": tool,
        "mutated": "trioqueue/_core/",
        "total": len(judged.mutants),
        "killed": judged.count("killed"),
        "timeout": judged.count("timeout"),
        "survived": len(judged.mutants) - sum(m.status in CAUGHT for m in judged.mutants),
        "equivalent": len(judged.equivalent),
        "unexplained": len(judged.unexplained),
        "score": round(judged.score, 4),
        "seconds": round(seconds),
    }


def _entry(m: Mutant) -> str:
    return f"  {m.status:<9} {m.file} {m.function}: {m.was!r} -> {m.now!r}  [{m.name}]"


def render(judged: Judged) -> str:
    """The report printed at the end of a run."""
    caught = sum(m.status in CAUGHT for m in judged.mutants)
    lines = [
        f"mutants: {len(judged.mutants)}, killed {judged.count('killed')}, "
        f"timeout {judged.count('timeout')}, survived {len(judged.mutants) - caught} "
        f"({len(judged.equivalent)} listed as equivalent, {len(judged.unexplained)} unexplained)",
        f"score: {judged.score:.1%} (caught / mutants not listed as equivalent)",
    ]
    if judged.unexplained:
        lines.append("survivors to kill with a test, or to list in proofs/mutants/equivalent.toml:")
        lines.extend(_entry(m) for m in judged.unexplained)
    if judged.stale:
        lines.append("entries of proofs/mutants/equivalent.toml that no survivor matches now:")
        lines.extend(f"  {e.file} {e.function}: {e.was!r} -> {e.now!r}" for e in judged.stale)
    return "\n".join(lines) + "\n"
