"""The mutants session's report (proofs/mutants/report.py) and its README section.

The session itself runs for many minutes (``nox -s mutants``, docs/testing.rst); these
check in milliseconds what it reads and writes: how a survivor is named from mutmut's
working copy, how survivors are judged against proofs/mutants/equivalent.toml, that every
entry there still names a line of the core, and that proofs/README.md shows the list.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests._modules import load_file

ROOT = Path(__file__).parents[2]
report = load_file(ROOT / "proofs" / "mutants" / "report.py", "_proofs_mutants_report")
backers = load_file(ROOT / "proofs" / "backers.py", "_proofs_backers")

#: A file as mutmut 3 writes it into its working copy: each function followed by its
#: unmutated copy and one copy per mutation (a trampoline dispatches between them).
MUTATED = '''
def x_pause__mutmut_orig(h, left, floor=0.25):
    """The pause."""
    return max(min(h, left / 2), floor)

def x_pause__mutmut_1(h, left, floor=0.25):
    """The pause."""
    return max(min(h, left / 3), floor)

def x_pause__mutmut_2(h, left, floor=1.25):
    """The pause."""
    return max(min(h, left / 2), floor)

class Backoff:
    def xǁBackoffǁdelay__mutmut_orig(self, n):
        exponent = n - 1
        return 2**exponent

    def xǁBackoffǁdelay__mutmut_1(self, n):
        exponent = None
        return 2**exponent
'''


def test_a_mutant_is_named_by_its_function_and_the_line_it_changes() -> None:
    names = ["pkg.mod.x_pause__mutmut_1", "pkg.mod.x_pause__mutmut_2"]
    names.append("pkg.mod.xǁBackoffǁdelay__mutmut_1")
    described = report.describe(MUTATED, names)
    assert described[names[0]] == (
        "return max(min(h, left / 2), floor)",
        "return max(min(h, left / 3), floor)",
    )
    # A mutated default value is in the signature, and named by it.
    assert described[names[1]] == (
        "def f(h, left, floor=0.25):",
        "def f(h, left, floor=1.25):",
    )
    assert described[names[2]] == ("exponent = n - 1", "exponent = None")
    assert report.function_of("xǁBackoffǁdelay__mutmut_1") == "Backoff.delay"
    assert report.function_of("x_pause__mutmut_12") == "pause"


def test_exit_codes_read_as_mutmut_reads_them() -> None:
    assert [report.status_of(code) for code in (1, 3, 0, 33, 36, -24, None, 37, 99)] == [
        "killed",
        "killed",
        "survived",
        "no tests",
        "timeout",
        "timeout",
        "not checked",
        "caught by type check",
        "suspicious",
    ]


def _mutant(status: str, now: str) -> object:
    return report.Mutant("m." + now, "trioqueue/_core/x.py", "f", status, "a = 1", now)


def test_survivors_are_listed_or_unexplained_and_old_entries_are_stale() -> None:
    mutants = [
        _mutant("killed", "a = 2"),
        _mutant("timeout", "a = 3"),
        _mutant("survived", "a = None"),
        _mutant("no tests", "a = 4"),
    ]
    listed = report.Equivalent("trioqueue/_core/x.py", "f", "a = 1", "a = None", "why")
    stale = report.Equivalent("trioqueue/_core/x.py", "f", "a = 1", "a = 5", "why")
    judged = report.judge(mutants, [listed, stale])
    assert [m.now for m in judged.equivalent] == ["a = None"]
    # A function no test reaches is a survivor too: it needs a test or an entry.
    assert [m.now for m in judged.unexplained] == ["a = 4"]
    assert judged.stale == (stale,)
    assert judged.score == 2 / 3  # killed and timed out, over all but the equivalent one
    summary = report.summary(judged, tool="mutmut 3.8.1", seconds=61.4, date="2026-12-01")
    assert (summary["total"], summary["survived"], summary["unexplained"]) == (4, 2, 1)
    assert "unexplained" in report.render(judged)


def _functions(path: Path) -> dict[str, str]:
    """Every function of a module by ``f`` or ``Class.f``, with its stripped source lines."""
    source = path.read_text("utf-8")
    lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body:
        scope = node.body if isinstance(node, ast.ClassDef) else [node]
        prefix = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
        for item in scope:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                body = lines[item.lineno - 1 : item.end_lineno]
                # The report names a function's signature line ``def f(...)``, whatever its name.
                body[0] = body[0].replace(item.name, "f", 1)
                found[prefix + item.name] = "\n".join(line.strip() for line in body)
    return found


def test_every_equivalent_entry_names_a_line_of_the_core_as_it_is() -> None:
    # An entry whose line has changed no longer matches a survivor: it must go (or be
    # judged again), not linger.
    entries = report.load_equivalents(ROOT / "proofs" / "mutants" / "equivalent.toml")
    for entry in entries:
        assert entry.file.startswith("trioqueue/_core/"), entry
        functions = _functions(ROOT / entry.file)
        assert entry.function in functions, entry
        for line in filter(None, entry.was.split(" / ")):
            assert line in functions[entry.function].splitlines(), entry
        assert entry.reason.strip(), entry


def test_the_readme_lists_the_equivalent_survivors_and_the_last_score() -> None:
    text = (ROOT / "proofs" / "README.md").read_text(encoding="utf-8")
    assert backers.readme_mutants(text) == backers.render_mutants(), (
        "proofs/README.md is out of date: run python proofs/backers.py --write"
    )


def test_the_section_is_rendered_from_the_two_files(tmp_path: Path) -> None:
    folder = tmp_path / "proofs" / "mutants"
    folder.mkdir(parents=True)
    run: dict[str, object] = {"date": "2026-12-01", "tool": "mutmut 3.8.1"}
    run |= {"mutated": "trioqueue/_core/"}
    run |= {"total": 10, "killed": 8, "timeout": 1, "survived": 1, "equivalent": 1}
    run |= {"unexplained": 0, "score": 1.0, "seconds": 600}
    (folder / "last-run.json").write_text(json.dumps(run), encoding="utf-8")
    entry = 'file = "trioqueue/_core/x.py"\nfunction = "f"\nwas = "a | b"\nnow = ""\n'
    (folder / "equivalent.toml").write_text(
        f'[[equivalent]]\n{entry}reason = "dead code"\n', encoding="utf-8"
    )
    section = backers.render_mutants(tmp_path)
    assert "10 mutants" in section and "about 10 minutes" in section
    assert "| `_core/x.py` | `f` | `a \\| b` | (nothing) | dead code |" in section


def test_writing_the_section_keeps_the_rest_of_the_readme() -> None:
    text = "# t\n\n## Mutation testing, `nox -s mutants`\n\nold\n\n## Next\n\nkept\n"
    assert backers.with_mutants(text, backers.MUTANTS_SECTION + "\n\nnew\n") == (
        "# t\n\n## Mutation testing, `nox -s mutants`\n\nnew\n\n## Next\n\nkept\n"
    )
    assert backers.with_mutants("# t\n\nbody\n", "## M\n") == "# t\n\nbody\n\n## M\n"
    assert backers.readme_mutants("# t\n") == ""


def test_the_sessions_proof_items_are_collected() -> None:
    """The mutants session runs proofs/test_proofs.py beside the unit tests; the normal
    suite does not collect it, so this keeps it from breaking unnoticed when the proofs
    change: every z3 proof and every one-batch scope is an item."""
    root = Path(__file__).resolve().parents[2]
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "proofs/test_proofs.py",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    items = [line for line in listed.stdout.splitlines() if "::" in line]
    assert sum("test_timing_proof_holds_of_the_code" in i for i in items) >= 15
    assert any("test_model_check_scope_has_no_violation" in i for i in items)
