"""Developer and CI sessions: ``nox -s tests lint typecheck docs proofs`` (and ``fast``,
``mutants``).

Every session builds a fresh virtualenv from the project's own metadata, so a
green run means the project installs and passes from scratch.
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["tests", "lint", "typecheck", "docs", "proofs"]

ROOT = Path(__file__).parent
LINT_PATHS = (
    "trioqueue",
    "tests",
    "bench",
    "proofs",
    "noxfile.py",
    "docs/conf.py",
    "docs/regenerate.py",
    "docs/render_rules.py",
    "docs/examples",
    "docs/render_reference.py",
    "docs/render_timing.py",
)


def _existing(paths: tuple[str, ...]) -> list[str]:
    # ruff fails on a path that does not exist; bench/ and tests/ may not yet.
    return [p for p in paths if (ROOT / p).exists()]


_VERSIONS_SCRIPT = """
import importlib.metadata as md, platform
print("python", platform.python_version())
for name in ("trio", "trio-asyncio", "asyncpg", "pytest", "pytest-trio", "hypothesis", "pgserver",
             "playwright"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "not installed")
"""


def _print_versions(session: nox.Session) -> None:
    session.run("python", "-c", _VERSIONS_SCRIPT, silent=False)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite against a regular (non-editable) install."""
    session.install(".[dev]")
    _print_versions(session)
    session.run("pytest", *session.posargs)


@nox.session
def fast(session: nox.Session) -> None:
    """Only tests/unit: no database, seconds (not a default session; CI runs ``tests``)."""
    session.install(".[dev]")
    session.run("pytest", "tests/unit", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install("ruff")
    session.run("ruff", "--version")
    paths = _existing(LINT_PATHS)
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package, its tests and benchmarks (settings in pyproject.toml)."""
    # Editable, so mypy sees one copy of trioqueue: the source tree.
    session.install("-e", ".[dev]")
    session.run("mypy", "--version")
    session.run("mypy", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx docs, warnings as errors."""
    session.install(".[docs]")
    session.run("sphinx-build", "-W", "-b", "html", "docs", "docs/_build/html")


@nox.session
def proofs(session: nox.Session) -> None:
    """proofs/: the z3 proofs, run on the core's own code, the conformance traces and corpus
    replayed, and the guard's model check, with their negative twins (``python
    proofs/run.py``, about 70 s). ``python proofs/mutations.py`` checks that each of issue
    #23's one-line mutations of the core fails it (about 15 minutes; not a session)."""
    session.install(".[proofs]")
    session.run("python", "proofs/run.py")


@nox.session
def mutants(session: nox.Session) -> None:
    """Mutation testing of trioqueue/_core/ with mutmut: the unit tests and proofs/run.py's
    pieces against every mutant; prints the score and the survivors, fails on a survivor
    neither killed nor listed in proofs/mutants/equivalent.toml (docs/testing.rst). Not a
    default session: a full run takes most of an hour on two cores. Arguments go to
    ``proofs/mutants/run.py`` (``--survivors``, ``--report``)."""
    session.install(".[dev,proofs,mutants]")
    session.run("python", "proofs/mutants/run.py", *session.posargs)
