"""The command lines the tutorial and the how-to guides show are true.

Every ``trioqueue ...`` line of their shell blocks, systemd units (``ExecStart=``) and
Dockerfiles (``CMD [...]``), and of their prose (``trioqueue show ID``, placeholders
filled in), parses with the real command line's parser; every
``MODULE:ATTR`` a worker line names exists in the example module the page shows for it;
and every stop timeout shown (systemd's ``TimeoutStopSec``, ``docker run --stop-timeout``)
leaves the worker its shutdown grace. Nothing runs: parsing is cheap and honest.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import trioqueue
from tests._modules import load_file
from trioqueue.cli._commands import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLES = DOCS / "examples"
PAGES = sorted([DOCS / "tutorial.rst", *(DOCS / "howto").glob("*.rst")])

#: The modules the pages' worker lines import, and the example file each one is.
MODULES = {
    "tutorial_postgres": EXAMPLES / "tutorial_postgres.py",
    "myapp.worker": EXAMPLES / "howto_deploy_worker.py",
    "myapp.jobs": EXAMPLES / "howto_throughput.py",
}

#: ``shutdown_grace`` when the command line leaves it out: the config's default.
DEFAULT_GRACE: float = trioqueue.WorkerConfig(handler=print).shutdown_grace


@dataclasses.dataclass(frozen=True)
class Block:
    page: str
    language: str
    lines: list[str]  # continuation lines joined


def blocks(page: Path) -> Iterator[Block]:
    """The ``code-block`` directives of ``page`` (also nested in lists), dedented."""
    lines = page.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        found = re.match(r"^(\s*)\.\. code-block:: *(\S+)", line)
        if not found:
            continue
        indent = len(found.group(1))
        body: list[str] = []
        for following in lines[number + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            body.append(following)
        text = "\n".join(body)
        text = re.sub(r"\\\n\s*", " ", text)  # a continued line is one line
        joined = [row.strip() for row in text.splitlines() if row.strip()]
        yield Block(page.name, found.group(2), joined)


def command_lines() -> list[tuple[str, list[str]]]:
    """Every ``trioqueue`` command shown, as (where, argv after the program name)."""
    found = []
    for page in PAGES:
        for block in blocks(page):
            for line in block.lines:
                for argv in commands_in(block.language, line):
                    found.append((f"{block.page}: {line}", argv))
    return found


def commands_in(language: str, line: str) -> Iterator[list[str]]:
    if language == "sh":
        words = shlex.split(line, comments=True)
    elif language == "ini" and line.startswith("ExecStart"):
        words = shlex.split(line.split("=", 1)[1])
    elif language == "dockerfile" and line.startswith("CMD"):
        argv = json.loads(line.removeprefix("CMD"))  # the exec form: a JSON list
        assert isinstance(argv, list), line
        words = argv
    else:
        return
    for start, word in enumerate(words):
        if word == "trioqueue" or word.endswith("/trioqueue"):
            yield words[start + 1 :]
            return


COMMANDS = command_lines()


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``argv`` with the real parser; a usage error fails with argparse's message."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"does not parse (exit {exc.code}): {errors.getvalue().strip()}")


def test_the_pages_show_commands() -> None:
    shown = {where.split(":")[0] for where, _ in COMMANDS}
    assert {"tutorial.rst", "deploy.rst", "many-workers.rst", "pgbouncer.rst"} <= shown
    assert sum(argv[:1] == ["worker"] for _, argv in COMMANDS) >= 5


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_command_parses(where: str, argv: list[str]) -> None:
    if argv in (["--version"], ["--help"]):
        with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exited:
            build_parser().parse_args(argv)
        assert exited.value.code == 0
        return
    args = parse(argv)
    if args.command == "enqueue" and not args.payload.startswith(("@", "-")):
        json.loads(args.payload)
    if args.command == "worker":
        for target in worker_targets(args):
            check_target(target)


def worker_targets(args: argparse.Namespace) -> list[str]:
    targets = [args.handler] if args.handler else []
    # Q=MODULE:HANDLER, or Q=MODULE:HANDLER@NAME on database NAME (a module has no "@").
    targets += [q.split("=", 1)[1].split("@")[0] for q in args.queue if "=" in q]
    return [*targets, args.resources] if args.resources else targets


def check_target(target: str) -> None:
    module_name, _, attr = target.partition(":")
    assert module_name in MODULES, f"{target}: no example module shows {module_name}"
    assert hasattr(load(MODULES[module_name]), attr), f"{target}: no {attr}"


def load(path: Path) -> ModuleType:
    return load_file(path, f"docs_command_{path.stem}")


def grace_of(argv: list[str]) -> float:
    args = parse(argv)
    grace: float | None = args.shutdown_grace
    return DEFAULT_GRACE if grace is None else grace


def test_systemd_waits_longer_than_the_grace() -> None:
    units = [b for p in PAGES for b in blocks(p) if b.language == "ini"]
    assert units
    for unit in units:
        settings = dict(line.split("=", 1) for line in unit.lines if "=" in line)
        assert settings["KillSignal"] == "SIGTERM"
        argv = next(commands_in("ini", f"ExecStart={settings['ExecStart']}"))
        assert float(settings["TimeoutStopSec"]) > grace_of(argv)


def test_containers_wait_longer_than_the_grace() -> None:
    files = [b for p in PAGES for b in blocks(p) if b.language == "dockerfile"]
    assert files
    for dockerfile in files:
        assert "STOPSIGNAL SIGTERM" in dockerfile.lines
        cmd = next(line for line in dockerfile.lines if line.startswith("CMD"))
        grace = grace_of(next(commands_in("dockerfile", cmd)))
        runs = [
            shlex.split(line)
            for p in PAGES
            for b in blocks(p)
            if b.language == "sh"
            for line in b.lines
            if line.startswith("docker run -d")
        ]
        assert runs
        for run in runs:
            assert float(run[run.index("--stop-timeout") + 1]) > grace


def inline_commands() -> list[str]:
    """The ``trioqueue ...`` literals of the pages' prose."""
    found: set[str] = set()
    for page in PAGES:
        found.update(re.findall(r"``trioqueue ([^`]+)``", page.read_text(encoding="utf-8")))
    return sorted(found)


#: What the prose's placeholders stand for.
PLACEHOLDERS = {"ID": "1", "...": "tutorial_postgres:count_words --queue words"}


@pytest.mark.parametrize("text", inline_commands())
def test_inline_command_parses(text: str) -> None:
    argv = shlex.split(text)
    if len(argv) == 1:  # a command's name: one the CLI has
        with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*argv, "--help"])
        assert exited.value.code == 0
        return
    words: list[str] = []
    for word in argv:
        words += PLACEHOLDERS.get(word, word).split()
    parse(words)
