"""The package's layers, read from the imports of its source files (``ast``, nothing imported).

The layers, bottom to top, are :data:`TIERS`; a module may import its own component and any
component of a lower tier, nothing else. So ``_core`` stands alone, the runtime reaches the
backends only through the Backend protocol, the two concrete backends never import each
other, and the web dashboard (``trioqueue.web``) sits on the public API, with the command
line (which serves the dashboard) above it. ``_core`` may import only the standard library and
cronsim (no trio, trio-asyncio or asyncpg): its
rules are sans-IO; so may the memory backend's reference model (:data:`STDLIB_ONLY`), which
is synchronous. No import cycles.

Every import counts for the layers, wherever it is: at module level, inside a function (a
lazy import) or under ``if TYPE_CHECKING:``. The cycle check looks at the imports a module
runs when it is imported: module level, minus ``if TYPE_CHECKING:`` blocks and function bodies.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "trioqueue"


@dataclass(frozen=True)
class Component:
    name: str
    packages: tuple[str, ...] = ()  # these modules and everything below them
    modules: tuple[str, ...] = ()  # exactly these modules

    def holds(self, module: str) -> int:
        """How specifically this component names ``module`` (0: not at all)."""
        if module in self.modules:
            return len(module) + 1
        matches = [len(p) for p in self.packages if module == p or module.startswith(p + ".")]
        return max(matches, default=0)


CORE = Component("core", packages=("trioqueue._core",))
SHARED = Component(
    "shared types and errors",
    modules=(
        "trioqueue._types",
        "trioqueue._operator_types",
        "trioqueue._errors",
    ),
)
# The seam to OpenTelemetry (docs/telemetry.rst): backends call it at enqueue, the runtime
# traces attempts with it; only trioqueue._otel imports opentelemetry, and only when found.
TELEMETRY = Component("telemetry", modules=("trioqueue._telemetry", "trioqueue._otel"))
PROTOCOL = Component(
    "backend protocol",
    modules=(
        "trioqueue._backends",
        "trioqueue._backends.interface",
        "trioqueue._backends.validation",
        "trioqueue._backends.operator_checks",
        "trioqueue._backends.dead_letter_checks",
        "trioqueue._backends.problems",
        "trioqueue._backends.dependency_checks",
        "trioqueue._backends.cursors",
        "trioqueue._backends.retention_checks",
        "trioqueue._backends.waiting",
    ),
)
RUNTIME = Component("runtime", packages=("trioqueue._runtime",))
MEMORY = Component("memory backend", packages=("trioqueue._backends.memory",))
POSTGRES = Component("postgres backend", packages=("trioqueue._backends.postgres",))
PUBLIC = Component("public API", modules=("trioqueue",))
TESTING = Component("testing", packages=("trioqueue.testing",))
METRICS = Component("metrics", modules=("trioqueue.metrics",))
CLI = Component("command line", packages=("trioqueue.cli",), modules=("trioqueue.__main__",))
WEB = Component("web dashboard", packages=("trioqueue.web",))

# Bottom to top. Components of one tier may not import each other: the runtime and the
# concrete backends are siblings above the protocol, and none of them knows the others.
TIERS: tuple[tuple[Component, ...], ...] = (
    (CORE,),
    (SHARED,),
    (TELEMETRY,),
    (PROTOCOL,),
    (RUNTIME, MEMORY, POSTGRES),
    (PUBLIC,),
    (TESTING, METRICS),
    (WEB,),
    (CLI,),  # `trioqueue dashboard` and the demo serve the web dashboard
)

# The command line uses the public API (``trioqueue``, ``trioqueue.testing``, ``trioqueue.metrics``;
# and ``trioqueue.web``, which `trioqueue dashboard` and the demo serve) and these
# private modules only, each for something the public API does not offer, and each only from
# the modules named here (one command group, or the helper that needs it): a new command
# module gets no private import unasked.
CLI_PRIVATE_IMPORTS: dict[str, tuple[str, frozenset[str]]] = {
    # The embedded PostgreSQL server that `trioqueue demo` starts when given no DSN: a
    # convenience of the demo and the tests, deliberately not public API.
    "trioqueue._backends.postgres.embedded": (
        "the demo's embedded server",
        frozenset({"trioqueue.cli._commands.demo"}),
    ),
    # check(config) lists every problem of a worker configuration at once, so that
    # `trioqueue worker` exits 2 with all of them before it connects (run_worker_pool checks
    # the same, but only once it has a backend); and whether a handler is async, for the
    # default concurrency.
    "trioqueue._runtime.config": (
        "the worker's configuration check before connecting",
        frozenset({"trioqueue.cli._commands.worker", "trioqueue.cli._worker_defaults"}),
    ),
    # Walking trio's exception groups and ``raise ... from`` chains, shared with the
    # PostgreSQL driver: one way to find the error a user should read.
    "trioqueue._errors": (
        "the exception-group and cause walkers",
        frozenset(
            {
                "trioqueue.cli._commands",
                "trioqueue.cli._commands.common",
                "trioqueue.cli._broken_pipe",
                "trioqueue.cli._dashboard",
            }
        ),
    ),
    # `trioqueue schedule set` checks its arguments (cron, time zone, ...) before it
    # connects, as the worker checks its configuration: bad input exits 2 with no database.
    "trioqueue._backends.validation": (
        "schedule set's checks before connecting",
        frozenset({"trioqueue.cli._schedule"}),
    ),
    # `trioqueue retention set` and `clear` check the queue name and keep-times with the
    # backend's own checks before connecting, as `schedule set` does.
    "trioqueue._backends.retention_checks": (
        "retention set's and clear's checks before connecting",
        frozenset({"trioqueue.cli._commands.retention"}),
    ),
    # `trioqueue worker --database NAME=DSN` checks every DSN before it connects (one error
    # listing every problem), and shows each with its password masked, as the driver does.
    "trioqueue._backends.postgres.driver": (
        "checking and masking the DSNs of several databases before connecting",
        frozenset({"trioqueue.cli._databases"}),
    ),
}

#: The command groups of `trioqueue`, one module each (trioqueue/cli/_commands/): each is
#: checked like any module of the command line, and none may be missing.
CLI_COMMAND_GROUPS = (
    "migrate", "worker", "enqueue", "job", "show", "queue", "status", "jobs", "schedule", "audit",
    "tables", "dashboard", "demo", "retention", "prune",
)  # fmt: skip


def _allowed_private(module: str, target: str) -> bool:
    """Whether command-line module ``module`` may import the private ``target``."""
    _, importers = CLI_PRIVATE_IMPORTS.get(target, ("", frozenset()))
    return module in importers


# Outside the standard library, only these third-party top-level modules may be imported,
# per component. _core is sans-IO; the runtime and the memory backend know no database driver.
# cronsim (pure cron arithmetic, no I/O) is how _core.schedule reads cron expressions.
THIRD_PARTY: dict[Component, frozenset[str]] = {
    CORE: frozenset({"cronsim"}),
    SHARED: frozenset(),
    TELEMETRY: frozenset({"opentelemetry"}),
    PROTOCOL: frozenset({"trio"}),
    RUNTIME: frozenset({"trio"}),
    MEMORY: frozenset({"trio"}),
    POSTGRES: frozenset({"trio", "trio_asyncio", "asyncpg", "pgserver"}),
    PUBLIC: frozenset(),
    TESTING: frozenset({"trio", "pytest"}),
    METRICS: frozenset({"trio", "prometheus_client"}),
    CLI: frozenset({"trio"}),
    WEB: frozenset({"trio", "starlette", "hypercorn", "jinja2", "prometheus_client"}),
}

# Modules held to the standard library (plus the package's own lower layers) inside a
# component that may import more: the memory backend's reference model is synchronous and
# runs without an event loop (porters and property tests drive it directly), and only its
# async shell, trioqueue._backends.memory.backend, knows trio.
STDLIB_ONLY: frozenset[str] = frozenset({"trioqueue._backends.memory.model"})


@dataclass(frozen=True)
class Import:
    target: str  # a module name, resolved to a module of the package where it names one
    line: int
    runs_on_import: bool  # module level, outside `if TYPE_CHECKING:`


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(body: Iterable[ast.stmt], runs: bool) -> Iterator[tuple[ast.stmt, bool]]:
    """Every statement, with whether it runs when its module is imported."""
    for node in body:
        yield node, runs
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk(node.body, False)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _walk(node.body, False)
            yield from _walk(node.orelse, runs)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    yield from _walk((c for c in children if isinstance(c, ast.stmt)), runs)
                    for child in children:
                        if isinstance(child, ast.ExceptHandler | ast.match_case):
                            yield from _walk(child.body, runs)


def imports_of(
    module: str, source: str, known: Iterable[str], *, is_package: bool = False
) -> list[Import]:
    """The imports in ``source``; ``from pkg import sub`` names ``pkg.sub`` when it is a module."""
    known = set(known)
    found = []
    for node, runs in _walk(ast.parse(source).body, True):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, node.lineno, runs) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.append(Import(candidate if candidate in known else base, node.lineno, runs))
    return found


def component_of(module: str) -> Component | None:
    ranked = [(c.holds(module), c) for tier in TIERS for c in tier]
    best, component = max(ranked, key=lambda pair: pair[0])
    return component if best else None


def tier_of(component: Component) -> int:
    return next(i for i, tier in enumerate(TIERS) if component in tier)


def layering_problems(graph: dict[str, list[Import]]) -> list[str]:
    problems = []
    for module, imports in sorted(graph.items()):
        source = component_of(module)
        if source is None:
            problems.append(f"{module}: in no layer; add it to TIERS in this test")
            continue
        for imp in imports:
            top = imp.target.split(".")[0]
            where = f"{module}:{imp.line} imports {imp.target}"
            if top != "trioqueue":
                third_party = top not in sys.stdlib_module_names and top != "__future__"
                allowed = frozenset() if module in STDLIB_ONLY else THIRD_PARTY[source]
                if third_party and top not in allowed:
                    problems.append(f"{where}: {source.name} may not import {top}")
                continue
            target = component_of(imp.target)
            if target is None or target is source:
                continue
            if source is CLI and _allowed_private(module, imp.target):
                continue
            if source is CLI and target not in (PUBLIC, TESTING, METRICS, WEB):
                problems.append(f"{where}: the command line uses only the public API")
            elif source is WEB and target not in (PUBLIC, METRICS):
                problems.append(f"{where}: the web dashboard uses only the public API")
            elif tier_of(target) >= tier_of(source):
                problems.append(f"{where}: {source.name} may not import {target.name}")
    return problems


def cycles(graph: dict[str, list[Import]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a self-import)."""
    edges = {
        module: sorted({i.target for i in imports if i.runs_on_import and i.target in graph})
        for module, imports in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm; the package is small
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == module:
                    break
            if len(members) > 1 or module in edges[module]:
                found.append(sorted(members))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def package_graph() -> dict[str, list[Import]]:
    modules = package_modules()
    return {
        name: imports_of(
            name, path.read_text(encoding="utf-8"), modules, is_package=path.name == "__init__.py"
        )
        for name, path in modules.items()
    }


def test_every_module_imports_only_downward() -> None:
    assert layering_problems(package_graph()) == []


def test_no_import_cycles() -> None:
    assert cycles(package_graph()) == []


def test_each_command_group_is_a_module_of_the_command_line() -> None:
    graph = package_graph()
    groups = {f"trioqueue.cli._commands.{group}" for group in CLI_COMMAND_GROUPS}
    assert graph.keys() >= groups
    assert {component_of(module) for module in groups} == {CLI}
    assert layering_problems({module: graph[module] for module in groups}) == []


def test_each_private_import_of_the_command_line_is_still_made() -> None:
    """No stale entry: every module allowed a private import exists and makes it."""
    graph = package_graph()
    for target, (_, importers) in CLI_PRIVATE_IMPORTS.items():
        for module in importers:
            assert target in {i.target for i in graph[module]}, (module, target)


def test_the_layers_cover_the_package() -> None:
    graph = package_graph()
    assert "trioqueue._core.guard_rules" in graph  # the graph is read at all
    assert graph.keys() >= STDLIB_ONLY  # no stale name: each is really checked
    assert {c.name for tier in TIERS for c in tier} == {
        component.name for module in graph if (component := component_of(module))
    }


# -- the checks catch what they are meant to ------------------------------------------------


def _graph(edges: dict[str, list[str]], runs: bool = True) -> dict[str, list[Import]]:
    return {module: [Import(t, 1, runs) for t in targets] for module, targets in edges.items()}


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("trioqueue._core.fence", "trio"),
        ("trioqueue._core.fence", "asyncpg"),
        ("trioqueue._core.fence", "trio_asyncio"),
        ("trioqueue._core.fence", "trioqueue._types"),
        ("trioqueue._runtime.pool", "trioqueue._backends.memory"),
        ("trioqueue._runtime.pool", "trioqueue._backends.postgres.backend"),
        ("trioqueue._runtime.pool", "asyncpg"),
        ("trioqueue._backends.memory.backend", "trioqueue._backends.postgres.sql"),
        ("trioqueue._backends.memory.model", "trio"),
        ("trioqueue._backends.postgres.backend", "trioqueue._runtime.pool"),
        ("trioqueue._backends.interface", "trioqueue._runtime.config"),
        ("trioqueue._types", "trioqueue._backends.validation"),
        ("trioqueue._runtime.guard", "trioqueue.testing"),
        ("trioqueue.testing._conformance", "trioqueue.cli"),
        ("trioqueue.cli._commands", "trioqueue._runtime.pool"),
        ("trioqueue.cli._commands.worker", "trioqueue._runtime.pool"),
        ("trioqueue.cli._commands.jobs", "trioqueue._types"),
        ("trioqueue.cli._commands.job", "trioqueue._backends.postgres.backend"),
        ("trioqueue.cli._commands.jobs", "trioqueue._backends.postgres.embedded"),
        ("trioqueue.cli._commands.status", "trioqueue._runtime.config"),
        ("trioqueue.web", "trioqueue._types"),
        ("trioqueue.web", "trioqueue._errors"),
        ("trioqueue.web", "trioqueue.testing"),
        ("trioqueue.web", "trioqueue.cli"),
        ("trioqueue.web", "asyncpg"),
    ],
)
def test_an_upward_or_sideways_import_is_reported(module: str, target: str) -> None:
    assert layering_problems(_graph({module: [target]})) != []


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("trioqueue._core.guard_rules", "heapq"),
        ("trioqueue._runtime.pool", "trioqueue._backends.interface"),
        ("trioqueue._backends.postgres.backend", "trioqueue._core.wire"),
        ("trioqueue._backends.memory.backend", "trio"),
        ("trioqueue._backends.memory.backend", "trioqueue._backends.memory.model"),
        ("trioqueue._backends.memory.model", "trioqueue._backends.validation"),
        ("trioqueue.testing", "trioqueue._backends.memory.faults"),
        ("trioqueue.cli._commands", "trioqueue"),
        ("trioqueue.cli._commands.job", "trioqueue"),
        ("trioqueue.cli._commands.demo", "trioqueue._backends.postgres.embedded"),
        ("trioqueue.cli._commands.worker", "trioqueue._runtime.config"),
        ("trioqueue.web", "trioqueue"),
        ("trioqueue.web", "trioqueue.metrics"),
        ("trioqueue.web", "starlette.routing"),
    ],
)
def test_a_downward_import_is_fine(module: str, target: str) -> None:
    assert layering_problems(_graph({module: [target]})) == []


def test_a_module_in_no_layer_is_reported() -> None:
    assert layering_problems(_graph({"trioqueue.gui": []})) != []


def test_a_cycle_is_reported_unless_it_waits_for_type_checking_or_a_call() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    assert cycles(_graph(edges)) == [["a", "b", "c"]]
    assert cycles(_graph(edges, runs=False)) == []


def test_imports_are_read_from_the_source() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import trio\n"
        "from trioqueue.cli import _demo, main\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n"
        "    from trioqueue._types import Job\n"
        "def f():\n"
        "    import asyncpg\n"
    )
    known = {"trioqueue.cli", "trioqueue.cli._demo", "trioqueue.cli.sibling"}
    found = {(i.target, i.runs_on_import) for i in imports_of("trioqueue.cli.x", source, known)}
    assert found == {
        ("typing", True),
        ("trio", True),
        ("trioqueue.cli._demo", True),
        ("trioqueue.cli", True),
        ("trioqueue.cli.sibling", True),
        ("trioqueue._types", False),
        ("asyncpg", False),
    }
