"""proofs/backers.py: the guarantees' backers exist, and proofs/README.md shows them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests._modules import load_file

ROOT = Path(__file__).resolve().parents[2]


backers = load_file(ROOT / "proofs" / "backers.py", "_proofs_backers")


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_readme_table_is_the_render() -> None:
    text = (ROOT / "proofs" / "README.md").read_text(encoding="utf-8")
    assert backers.readme_table(text) == backers.render_markdown(), (
        "proofs/README.md is out of date: run python proofs/backers.py --write"
    )


def _invariants_of_the_protocol() -> list[str]:
    """The ids of docs/protocol.rst's "§9 Invariants" table, in its order."""
    text = (ROOT / "docs" / "protocol.rst").read_text(encoding="utf-8")
    table = text.split("\n§9 Invariants\n", 1)[1].split("\n§10 ", 1)[0]
    return re.findall(r"^   \* - (I\d+)$", table, re.MULTILINE)


def test_every_invariant_and_both_rules_have_a_row() -> None:
    ids = [g.id for g in backers.GUARANTEES]
    invariants = _invariants_of_the_protocol()
    assert invariants[:17] == [f"I{n}" for n in range(1, 18)]
    assert ids == [*invariants, "§1", "§4"]


def test_every_test_file_and_name_exists() -> None:
    for guarantee in backers.GUARANTEES:
        assert guarantee.tests, guarantee.id
        for tests in guarantee.tests:
            path = ROOT / "tests" / tests.file
            assert path.is_file(), f"{guarantee.id}: {tests.file}"
            defined = _defined(path)
            for name in tests.names:
                if name.endswith("*"):
                    assert any(d.startswith(name[:-1]) for d in defined), (guarantee.id, name)
                else:
                    assert name in defined, (guarantee.id, name)


def test_every_test_I_name_mentioned_exists() -> None:
    mentioned = {
        name
        for guarantee in backers.GUARANTEES
        for tests in guarantee.tests
        for name in tests.names
        if re.match(r"test_I\d+_", name)
    }
    assert mentioned
    defined = set().union(*(_defined(p) for p in (ROOT / "tests").rglob("test_*.py")))
    for name in mentioned:
        prefix = name.rstrip("*")
        assert any(d.startswith(prefix) for d in defined), name


def test_a_test_I_name_pins_its_own_invariant() -> None:
    for guarantee in backers.GUARANTEES:
        for tests in guarantee.tests:
            for name in tests.names:
                pinned = re.match(r"(?:test_)?(I\d+)_", name)
                assert pinned is None or pinned.group(1) == guarantee.id, (guarantee.id, name)


def test_every_proof_is_a_function_of_timing() -> None:
    defined = _defined(ROOT / "proofs" / "timing.py")
    for guarantee in backers.GUARANTEES:
        for proof in guarantee.proofs:
            assert proof.function in defined, (guarantee.id, proof.function)


def test_model_check_and_traces_count_only_once_they_exist(tmp_path: Path) -> None:
    assert not any(row.model_check or row.traces for row in backers.rows(tmp_path))
    (tmp_path / "proofs" / "traces").mkdir(parents=True)
    (tmp_path / "proofs" / "model_check.py").write_text("", encoding="utf-8")
    (tmp_path / "proofs" / "traces" / "t.txt").write_text("invariants: I1 I5 I12\n")
    rows = {row.guarantee.id: row for row in backers.rows(tmp_path)}
    assert {i for i, row in rows.items() if row.model_check} == {"I2", "I4", "I5", "I6", "I8", "§4"}
    assert {i for i, row in rows.items() if row.traces} == {"I5", "I12"}
    assert "the model check (`proofs/model_check.py`)" in backers.render_markdown(tmp_path)
    assert "the conformance traces (``proofs/traces/``)" in backers.render_rst(tmp_path)


def test_write_replaces_only_the_table() -> None:
    text = "# x\n\n## Every invariant and what backs it\n\nwords\n\n| a |\n| b |\n\n## To come\n"
    out = backers.with_table(text, "| new |\n")
    assert out == "# x\n\n## Every invariant and what backs it\n\nwords\n\n| new |\n\n## To come\n"
    with pytest.raises(ValueError, match="no table"):
        backers.readme_table("## Every invariant and what backs it\n\nno table\n## next\n")


# -- the rules of docs/protocol.rst -----------------------------------------------------


def _protocol_rules() -> list[str]:
    """Every numbered rule of docs/protocol.rst: its sections that state rules (§9 lists the
    invariants, §11 and §12 are notes to readers and porters), and each refinement of §10."""
    text = (ROOT / "docs" / "protocol.rst").read_text(encoding="utf-8")
    sections = re.findall(r"^(§\d+(?:\.\d+)?) ", text, flags=re.MULTILINE)
    refinements_text = text[text.index("\n§10 ") : text.index("\n§11 ")]
    refinements = re.findall(r"^(\d+)\. \*\*", refinements_text, flags=re.MULTILINE)
    notes = {"§9", "§10", "§11", "§12"}
    return [s for s in sections if s not in notes] + [f"§10.{n}" for n in refinements]


def test_every_rule_of_the_protocol_has_a_row() -> None:
    rules = _protocol_rules()
    assert "§10.22" in rules and "§4.1" in rules  # the parse finds both kinds
    assert sorted(r.id for r in backers.RULES) == sorted(rules)


def test_rules_table_is_the_render() -> None:
    text = (ROOT / "proofs" / "README.md").read_text(encoding="utf-8")
    assert backers.readme_table(text, backers.RULES_SECTION) == backers.render_rules_markdown(), (
        "proofs/README.md is out of date: run python proofs/backers.py --write"
    )


def test_every_rule_is_backed_by_what_exists() -> None:
    traces = {p.stem for p in (ROOT / "proofs" / "traces").glob("*.json")}
    proofs = _defined(ROOT / "proofs" / "timing.py")
    maintainer_proofs = _defined(ROOT / "proofs" / "maintainer_timing.py")
    twins = {
        node.name
        for node in ast.walk(ast.parse((ROOT / "proofs" / "model_check.py").read_text()))
        if isinstance(node, ast.ClassDef)
    }
    for rule in backers.RULES:
        assert rule.traces or rule.tests, rule.id
        for name in rule.traces:
            assert name in traces, (rule.id, name)
        for check in rule.checks:
            where, _, name = check.partition(".")
            known = {"timing": proofs, "maintainer_timing": maintainer_proofs, "model_check": twins}
            assert name in known[where], (rule.id, check)
        for tests in rule.tests:
            path = ROOT / "tests" / tests.file
            assert path.is_file(), (rule.id, tests.file)
            defined = _defined(path)
            for name in tests.names:
                found = (
                    any(d.startswith(name[:-1]) for d in defined)
                    if name.endswith("*")
                    else (name in defined)
                )
                assert found, (rule.id, name)


def test_every_named_trace_backs_a_rule() -> None:
    named = {
        p.stem
        for p in (ROOT / "proofs" / "traces").glob("*.json")
        if p.name != "schema.json" and not p.name.startswith("drawn-")
    }
    cited = {name for rule in backers.RULES for name in rule.traces}
    assert named - cited == set()
