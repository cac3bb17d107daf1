"""Every install line of the README and the docs works on a fresh machine today.

trioqueue is not on the package index: ``pip install trioqueue`` fails there. So every
``pip install`` (and ``pip wheel``) line of README.md and docs/**/*.rst, in code blocks and
in prose, and every line of a ``requirements.txt`` the docs show, must install from a
checkout (``.`` or ``-e .``, the directory that holds pyproject.toml) or from the wheel
built from it (``trioqueue-VERSION-py3-none-any.whl``, VERSION the checkout's own), and
may name only extras that pyproject.toml defines. Nothing is installed here; the report of
issue 22 says which lines were run in a fresh venv.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import shlex
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NAME: str = PYPROJECT["name"]
EXTRAS = frozenset(PYPROJECT["optional-dependencies"])
#: What ``pip wheel .`` names the checkout's wheel (a pure-Python one).
WHEEL = f"{NAME}-{PYPROJECT['version']}-py3-none-any.whl"

FILES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.rst")])
#: pip's options that take a value (the value is not a requirement).
VALUED = {"-w", "--wheel-dir", "-c", "--constraint", "-i", "--index-url", "--target"}
#: A requirement: a path or a name, optional extras, optional ``@ URL``.
REQUIREMENT = re.compile(
    r"^(?P<what>[^\[@\s]+)(?:\[(?P<extras>[^\]]*)\])?(?:\s*@\s*(?P<url>\S+))?$"
)


@dataclasses.dataclass(frozen=True)
class Install:
    where: str  # file:line
    command: str  # pip install / pip wheel, or "requirements.txt"
    requirements: tuple[str, ...]
    requirement_files: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.where


def _commands(line: str) -> Iterator[tuple[str, str]]:
    """Each ``pip install|wheel ARGS`` of a line: the subcommand and its arguments, up to
    ``&&``, ``;``, a closing literal (``` `` ``` or `````) or the end of the line."""
    for found in re.finditer(r"\bpip(?:3)? (install|wheel)\b(.*)", line):
        arguments = re.split(r"&&|;|``|`", found.group(2))[0]
        yield found.group(1), arguments


def _parse(arguments: str) -> tuple[list[str], list[str]]:
    """The requirements and the ``-r`` files of pip's arguments."""
    requirements: list[str] = []
    files: list[str] = []
    words = iter(shlex.split(arguments, comments=True))
    for word in words:
        if word in ("-r", "--requirement"):
            files.append(next(words))
        elif word in VALUED:
            next(words)
        elif word in ("-e", "--editable"):
            requirements.append(next(words))
        elif not word.startswith("-"):
            requirements.append(word)
    return requirements, files


def _requirements_blocks(path: Path, lines: list[str]) -> Iterator[Install]:
    """The lines of each code block captioned ``requirements.txt``."""
    for number, line in enumerate(lines):
        if not re.match(r"^\s*\.\. code-block::", line):
            continue
        options = lines[number + 1 : number + 4]
        if not any(re.match(r"^\s*:caption: requirements\.txt\s*$", o) for o in options):
            continue
        body = number + 1
        while body < len(lines) and (lines[body].strip().startswith(":") or not lines[body]):
            body += 1
        indent = len(lines[body]) - len(lines[body].lstrip())
        found: list[str] = []
        while body < len(lines) and (
            not lines[body].strip() or len(lines[body]) - len(lines[body].lstrip()) >= indent
        ):
            text = lines[body].split(" #")[0].strip()  # a comment may follow
            if text and not text.startswith("#"):
                found.append(text)
            body += 1
        where = f"{path.relative_to(ROOT)}:{number + 1}"
        yield Install(where, "requirements.txt", tuple(found))


def _joined(lines: list[str]) -> Iterator[tuple[int, str]]:
    """Each line, numbered from 1, with the lines a trailing backslash continues."""
    number = 0
    while number < len(lines):
        first, line = number, lines[number]
        while line.endswith("\\") and number + 1 < len(lines):
            number += 1
            line = line[:-1] + " " + lines[number].strip()
        yield first + 1, line
        number += 1


def installs() -> list[Install]:
    found: list[Install] = []
    for path in FILES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in _joined(lines):
            for command, arguments in _commands(line):
                requirements, files = _parse(arguments)
                where = f"{path.relative_to(ROOT)}:{number}"
                found.append(Install(where, command, tuple(requirements), tuple(files)))
        found.extend(_requirements_blocks(path, lines))
    return found


INSTALLS = installs()


def problems(install: Install) -> list[str]:
    """What would fail on a fresh machine today, or name an extra that does not exist."""
    found: list[str] = []
    if not install.requirements and not install.requirement_files:
        found.append("installs nothing")
    for requirement in install.requirements:
        match = REQUIREMENT.match(requirement)
        if match is None:
            found.append(f"{requirement!r} is no requirement this test can read")
            continue
        what, url = match.group("what"), match.group("url")
        extras = {e.strip() for e in (match.group("extras") or "").split(",") if e.strip()}
        found += [f"{requirement!r}: no extra {e!r} in pyproject.toml" for e in extras - EXTRAS]
        if url is not None:
            if what != NAME or not url.startswith("file:///") or Path(url).name != WHEEL:
                found.append(f"{requirement!r}: not the wheel built from the checkout ({WHEEL})")
        elif what in (".", "./"):
            pass  # the checkout itself: the directory of pyproject.toml
        elif what.endswith(".whl"):
            if Path(what).name != WHEEL:
                found.append(f"{requirement!r}: not the wheel built from the checkout ({WHEEL})")
        else:
            found.append(f"{requirement!r}: not on the package index; install from a checkout")
    for name in install.requirement_files:
        shown = [i for i in INSTALLS if i.command == "requirements.txt"]
        if Path(name).name != "requirements.txt" or not shown:
            found.append(f"-r {name}: the docs show no such file's lines")
    if install.command == "wheel" and install.requirements not in ((".",), ("./",)):
        found.append("pip wheel builds the checkout's own wheel: `pip wheel --no-deps .`")
    return found


def test_the_install_lines_are_found() -> None:
    """The finder sees the README's two commands, the tutorial's install and the
    deployment's requirements file: the test below cannot pass for want of lines."""
    where = {i.where.split(":")[0] for i in INSTALLS}
    assert {"README.md", "docs/tutorial.rst", "docs/howto/deploy.rst"} <= where
    readme = [i.requirements for i in INSTALLS if i.where.startswith("README.md")]
    assert readme[:2] == [(".[embedded,dashboard]",), (".[dev]",)]
    assert any(i.command == "requirements.txt" for i in INSTALLS)


@pytest.mark.parametrize("install", INSTALLS, ids=str)
def test_every_install_line_works_from_a_checkout_and_names_existing_extras(
    install: Install,
) -> None:
    assert not problems(install), f"{install.where}: {problems(install)}"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("pip install 'trioqueue[embedded]'", "not on the package index"),
        ("pip install trioqueue", "not on the package index"),
        ("pip install -e '.[embeded]'", "no extra 'embeded'"),
        ("pip install 'trioqueue @ file:///w/trioqueue-0.0.1-py3-none-any.whl'", "not the wheel"),
        ("pip wheel trioqueue", "builds the checkout's own wheel"),
    ],
)
def test_a_line_that_fails_on_a_fresh_machine_is_refused(line: str, problem: str) -> None:
    [(command, arguments)] = _commands(line)
    requirements, files = _parse(arguments)
    found = problems(Install("here", command, tuple(requirements), tuple(files)))
    assert any(problem in p for p in found), found


# -- the install hints the code prints ---------------------------------------------------

#: The one form of every install hint the code prints (trioqueue/cli/_install.py): the
#: extra, the line that installs it from a checkout, and the wheel.
HINT = re.compile(
    r"install the (?P<extra>[a-z]+) extra: pip install -e '\.\[(?P=extra)\]' from a "
    r"checkout, or the wheel with \[(?P=extra)\]"
)
PACKAGE = ROOT / "trioqueue"


def hint_problems(text: str) -> list[str]:
    """What is wrong with the install hints of ``text``: a ``pip install`` outside the one
    form, or an extra pyproject.toml does not define (as the docs' lines are judged)."""
    text = " ".join(text.split())  # argparse wraps its help text
    found: list[str] = []
    hints = list(HINT.finditer(text))
    if text.count("pip install") != len(hints):
        found.append(f"a pip install line not in the hint's form: {text!r}")
    for hint in hints:
        install = Install("code", "install", (f".[{hint.group('extra')}]",))
        found += problems(install)
    return found


def _source_strings() -> Iterator[tuple[str, str]]:
    """Each string constant of the package's code that holds ``pip install``, and where; an
    f-string that does is refused (install_hint's template, whose output the printed hints
    check, is the one module left out)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where == "trioqueue/cli/_install.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
                if any("pip install" in str(part) for part in parts):
                    yield where, f"an f-string that writes its own pip install: {parts}"
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and "pip install" in node.value
            ):
                yield where, node.value


def printed_hints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, str]:
    """What the command line prints where an extra is missing, and in ``demo --help``."""
    from trioqueue._backends.postgres import embedded
    from trioqueue.cli import _dashboard, main

    shown: dict[str, str] = {}
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    shown["demo --help"] = capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "pgserver", None)  # an import of it fails
    monkeypatch.setitem(sys.modules, "pgserver.postgres_server", None)
    with pytest.raises(embedded.EmbeddedPostgresError) as no_server:
        embedded._import_pgserver()
    shown["demo without pgserver"] = str(no_server.value)
    monkeypatch.setitem(sys.modules, "trioqueue.web", None)
    with pytest.raises(ValueError, match="install") as no_web:
        _dashboard.check("127.0.0.1")
    shown["dashboard without its extra"] = str(no_web.value)
    shown["demo without the dashboard"] = _demo_dashboard_line(monkeypatch)
    # Last: no module can be found from here on (prometheus_client's is the one asked for).
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert main(["--dsn", "x", "worker", f"{__name__}:noop", "--queue", "q",
                 "--metrics-port", "0"]) == 2  # fmt: skip
    shown["--metrics-port without its extra"] = capsys.readouterr().err
    return shown


async def noop(payload: object, ctx: object) -> None:
    """A handler for the worker's metrics hint."""


def _demo_dashboard_line(monkeypatch: pytest.MonkeyPatch) -> str:
    """The demo's dashboard line when the dashboard's extra is not installed."""
    import trio

    import trioqueue
    from trioqueue.cli import _dashboard, _demo

    async def missing(*args: object, **kwargs: object) -> str:
        raise ImportError("No module named 'starlette'")

    monkeypatch.setattr(_dashboard, "start", missing)

    async def line() -> str:
        async with trioqueue.open_memory() as backend, trio.open_nursery() as nursery:
            return await _demo.start_dashboard(nursery, backend, 0)

    return trio.run(line)


def test_every_install_hint_the_code_prints_names_an_existing_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = printed_hints(monkeypatch, capsys)
    assert {name: text for name, text in shown.items() if "pip install" not in text} == {}
    assert {name: hint_problems(text) for name, text in shown.items() if hint_problems(text)} == {}


def test_every_install_hint_in_the_code_has_the_one_form() -> None:
    strings = list(_source_strings())
    assert strings, "the embedded server's hint at least is a string constant"
    assert [(where, hint_problems(text)) for where, text in strings if hint_problems(text)] == []


@pytest.mark.parametrize(
    "text",
    [
        "pip install 'trioqueue[dashboard]'",
        "install the dashbord extra: pip install -e '.[dashbord]' from a checkout, or the "
        "wheel with [dashbord]",
        "install the metrics extra: pip install -e '.[dashboard]' from a checkout, or the "
        "wheel with [metrics]",
    ],
)
def test_a_hint_that_would_not_work_is_refused(text: str) -> None:
    assert hint_problems(text)
