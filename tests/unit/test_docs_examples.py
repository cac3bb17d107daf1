"""Every example of the docs runs: the ones on the memory backend here, under a MockClock.

The docs pull each example from docs/examples/ with ``literalinclude`` (conventions in
docs/examples/README.md), so a page cannot show code that no longer works. The examples
that need PostgreSQL run in tests/postgres/test_docs_examples_postgres.py; example test
modules (``test_*.py``) run here through pytest itself.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import trio
import trio.testing

from tests._modules import load_file

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLES = DOCS / "examples"


def load(path: Path) -> ModuleType:
    return load_file(path, f"docs_example_{path.stem}")


def examples(*, postgres: bool) -> list[Path]:
    """The runnable examples, those whose ``main`` takes a DSN or those that take nothing:
    the harness tells them apart, so that no marker shows in the code a page pulls in."""
    found = []
    for path in sorted(EXAMPLES.glob("*.py")):
        if path.name.startswith("test_"):
            continue
        if needs_postgres(path) == postgres:
            found.append(path)
    return found


def needs_postgres(path: Path) -> bool:
    """Whether ``path``'s ``main`` is ``main(dsn, schema)`` (docs/examples/README.md), read
    from its source without importing it."""
    return main_parameters(path)[:2] == ["dsn", "schema"]


def main_parameters(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "main":
            return [argument.arg for argument in node.args.args]
    raise AssertionError(f"{path.name} has no top-level `async def main`")


def run_example(path: Path) -> None:
    module = load(path)
    if getattr(module, "REAL_CLOCK", False):
        trio.run(module.main)
    else:
        trio.run(module.main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("path", examples(postgres=False), ids=lambda p: p.stem)
def test_example_runs(path: Path) -> None:
    run_example(path)


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(EXAMPLES.glob("*.py")) if not p.name.startswith("test_")],
    ids=lambda p: p.stem,
)
def test_an_example_is_run_by_its_main_alone_and_shows_no_test_plumbing(path: Path) -> None:
    """``main()`` runs on the memory backend, ``main(dsn, schema)`` on PostgreSQL; nothing
    in the file is there only for the docs' tests to read (a page shows it to readers)."""
    assert main_parameters(path) in ([], ["dsn", "schema"])
    assert "NEEDS_POSTGRES" not in path.read_text(encoding="utf-8")


def test_example_test_modules_pass() -> None:
    modules = sorted(str(p) for p in EXAMPLES.glob("test_*.py"))
    if not modules:
        pytest.skip("no example test modules yet")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *modules],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


#: Lines of an example fit a docs page's code block without a scroll bar.
PAGE_WIDTH = 88


def test_examples_fit_the_page() -> None:
    long = [
        f"{path.name}:{number}"
        for path in sorted(EXAMPLES.glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > PAGE_WIDTH
    ]
    assert not long, f"lines longer than {PAGE_WIDTH} characters: {long}"


def test_every_example_is_shown_and_exists() -> None:
    """Each literalinclude names a file that exists, and each example is shown somewhere."""
    shown = set()
    for page in DOCS.rglob("*.rst"):
        for name in re.findall(r"literalinclude:: +(\S*examples/\S+\.py)", page.read_text()):
            target = (page.parent / name).resolve()
            assert target.exists(), f"{page.name} includes a missing example {name}"
            shown.add(target)
    unshown = [p.name for p in EXAMPLES.glob("*.py") if p.resolve() not in shown]
    assert not unshown, f"examples no page shows: {unshown}"


def test_no_page_asks_for_a_table_of_contents() -> None:
    """Furo draws each page's contents itself, and shows ``.. contents::`` as an error box."""
    asking = [p.name for p in DOCS.rglob("*.rst") if ".. contents::" in p.read_text()]
    assert not asking, f"pages with a contents directive: {asking}"


def test_code_blocks_of_the_pages_fit_the_page() -> None:
    """Inline code blocks (shell, config files) fit the page like the examples do."""
    long = []
    for page in sorted(DOCS.rglob("*.rst")):
        if "_build" in page.parts or "_generated" in page.parts:
            continue
        in_block = False
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith(".. code-block::"):
                in_block = True
            elif in_block and line and not line.startswith(" "):
                in_block = False
            elif in_block and len(line) - 3 > PAGE_WIDTH:  # less the block's indent
                long.append(f"{page.relative_to(DOCS)}:{number}")
    assert not long, f"code block lines longer than {PAGE_WIDTH} characters: {long}"
